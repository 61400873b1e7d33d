"""mx.ir: the Graph IR as a user-facing object: build (`make_graph`, `Graph`), run
(`eval_graph`, `compile`), transform (`grad`, `jvp`, `hvp`, `vmap`, `nth_order_grad`)
and optimize (`optimize`, `decompose`).

Where it sits: a public face over the graph floor (mirax/graph/: Graph, listings,
staging, interpret), the interpreters (ir.transforms runs them on graphs) and the
compiler's passes."""
from mirax.compiler.decompose import decompose  # noqa: F401
from mirax.compiler.pipeline import optimize  # noqa: F401
from mirax.core import tree
from mirax.core.runtime import executable, get_device
from mirax.graph.build import make_graph  # noqa: F401
from mirax.graph.graph import Graph, Node, Var  # noqa: F401
from mirax.graph.interpret import eval_graph  # noqa: F401
from mirax.ir.transforms import grad, hvp, jvp, nth_order_grad, simplify, vmap  # noqa: F401
from mirax.ops.call import call_p


def compile(graph: Graph, device=None):
    """A callable running `graph` compiled for `device` (default: the default device);
    it returns the outputs in the graph's output structure (a list if it has none)."""
    dev = get_device(device)
    executable(graph, dev.platform)  # compile now, so errors surface here

    def run(*args):
        outs = call_p.bind(*args, graph=graph)
        return tree.unflatten(graph.out_tree, outs) if graph.out_tree is not None else outs
    run.graph = graph
    return run
