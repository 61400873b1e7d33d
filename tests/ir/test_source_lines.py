"""Listings attribute derivative nodes to the user's line of the op they differentiate."""
import os

import numpy as np
import pytest

import mirax as mx
import mirax.numpy as mnp

FILE = os.path.basename(__file__)


def f(x):
    y = mnp.sin(x) * x
    return mnp.sum(mnp.exp(y))


LINE1 = f"{FILE}:{f.__code__.co_firstlineno + 1}"
LINE2 = f"{FILE}:{f.__code__.co_firstlineno + 2}"
X = mx.asarray(np.linspace(0.1, 0.9, 3, dtype=np.float32))
N_FORWARD = len(mx.make_graph(f)(X).nodes)


def line_number(source: str) -> int:
    return int(source.rsplit(":", 1)[1])


def check_backward_lines(graph, call_line: int):
    """Every node is on f's lines; the backward nodes (from the seed cotangent on) of line
    2's ops come first, then line 1's; cos (only in sin's derivative) is on line 1; nothing
    is on the grad call's line. (grad of jit recomputes the forward ops in its graph.)"""
    sources = [n.source for n in graph.nodes]
    assert set(sources) == {LINE1, LINE2}, sources
    assert all(line_number(s) != call_line for s in sources)
    start = [n.prim.name for n in graph.nodes].index("broadcast_in_dim")  # the seed's
    assert start >= N_FORWARD
    backward = sources[start:]
    assert backward == sorted(backward, key=line_number, reverse=True), backward
    assert LINE1 in backward and LINE2 in backward
    assert [n.source for n in graph.nodes if n.prim.name == "cos"] == [LINE1]
    assert {n.source for n in graph.nodes if n.prim.name == "exp"} == {LINE2}


def test_grad_listing_points_backward_nodes_at_forward_lines():
    call_line = test_grad_listing_points_backward_nodes_at_forward_lines.__code__\
        .co_firstlineno + 2
    graph = mx.make_graph(mx.grad(f))(X)  # (call_line)
    check_backward_lines(graph, call_line)
    assert str(graph).count(f"# {LINE1}") >= 4  # the listing shows them


@pytest.mark.parametrize("how", ["jit(grad)", "grad(jit)"])
def test_under_jit(how):
    fn = mx.jit(mx.grad(f)) if how == "jit(grad)" else mx.grad(mx.jit(f))
    graph = mx.make_graph(fn)(X)   # jit inlined into make_graph keeps its nodes' lines
    check_backward_lines(graph, test_under_jit.__code__.co_firstlineno + 3)
    np.testing.assert_allclose(np.asarray(fn(X)), np.asarray(mx.grad(f)(X)), rtol=1e-6)


def test_jit_grad_own_graph():
    """The graph jit compiles (the one MIRAX_DEBUG lists) has the same lines."""
    jg = mx.jit(mx.grad(f))
    jg(X)
    (entry,) = jg.cache.values()
    check_backward_lines(entry[0], test_jit_grad_own_graph.__code__.co_firstlineno + 3)


def test_jvp_tangent_nodes_carry_primal_lines():
    graph = mx.make_graph(lambda x: mx.jvp(f, (x,), (x,)))(X)
    sources = [n.source for n in graph.nodes]
    assert set(sources) == {LINE1, LINE2}, sources
    assert [n.source for n in graph.nodes if n.prim.name == "cos"] == [LINE1]


def test_second_derivative_stays_on_forward_lines():
    def g(x):
        return mnp.sum(mx.grad(f)(x))
    graph = mx.make_graph(mx.grad(g))(X)
    g_line = f"{FILE}:{g.__code__.co_firstlineno + 1}"
    sources = {n.source for n in graph.nodes}
    assert sources == {LINE1, LINE2, g_line}, sources
    # the sum in g and its transpose are g's; everything from f's ops is f's
    assert {n.source for n in graph.nodes if n.prim.name in ("cos", "sin", "exp")} == \
        {LINE1, LINE2}


def test_eager_grad_unchanged():
    np.testing.assert_allclose(
        np.asarray(mx.grad(f)(X)),
        np.exp(np.sin(X) * X) * (np.cos(X) * X + np.sin(X)), rtol=1e-5)
