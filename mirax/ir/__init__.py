"""mx.ir: the Graph IR as a user-facing object: build (`make_graph`, `Graph`), run
(`eval_graph`, `compile`), transform (`grad`, `jvp`, `hvp`, `vmap`, `nth_order_grad`)
and optimize (`optimize`, `decompose`). Heavier names load on first use (the compiler
imports this package)."""
from mirax.graph.graph import Graph, Node, Var  # noqa: F401
from mirax.graph.interpret import eval_graph  # noqa: F401
from mirax.core.runtime import get_device, executable
from mirax.core import tree
from mirax.ops.call import call_p

_LAZY = {
    "make_graph": ("mirax.ir.build", "make_graph"),
    "grad": ("mirax.ir.transforms", "grad"),
    "jvp": ("mirax.ir.transforms", "jvp"),
    "hvp": ("mirax.ir.transforms", "hvp"),
    "vmap": ("mirax.ir.transforms", "vmap"),
    "nth_order_grad": ("mirax.ir.transforms", "nth_order_grad"),
    "simplify": ("mirax.ir.transforms", "simplify"),
    "optimize": ("mirax.compiler", "optimize"),
    "decompose": ("mirax.compiler.decompose", "decompose"),
}


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


def __getattr__(name):
    if name in _LAZY:
        import importlib
        mod, attr = _LAZY[name]
        try:
            value = getattr(importlib.import_module(mod), attr)
        except (ImportError, AttributeError) as e:
            raise AttributeError(f"mirax.ir.{name} is not available yet ({e})") from None
        globals()[name] = value
        return value
    raise AttributeError(f"module 'mirax.ir' has no attribute {name!r}")
