"""Error messages: bad shapes, axes, dtypes and arguments raise TypeError/ValueError naming
the operation and the offending operands in listing notation (f32[3,4]); tracing errors
raise ConcretizationError naming the argument and the fix."""
from __future__ import annotations

import pytest

import mirax as mx
import mirax.numpy as mnp


def ones(*shape, dtype=None):
    return mnp.ones(shape, dtype)


SHAPE_ERRORS = [
    ("add", lambda: mnp.add(ones(3), ones(4)), ["add", "f32[3]", "f32[4]"]),
    ("mul_op", lambda: ones(2, 3) * ones(3, 2), ["mul", "f32[2,3]", "f32[3,2]"]),
    ("sum_axis", lambda: mnp.sum(ones(3, 4), axis=2),
     ["sum", "axis 2 is out of range for f32[3,4]"]),
    ("mean_axis", lambda: mnp.mean(ones(3, 4), axis=-3), ["mean", "axis -3", "f32[3,4]"]),
    ("argmax_axis", lambda: mnp.argmax(ones(3, 4), axis=5), ["argmax", "f32[3,4]"]),
    ("repeated_axis", lambda: mnp.sum(ones(3, 4), axis=(0, 0)), ["sum", "repeated axis"]),
    ("matmul", lambda: ones(3, 4) @ ones(3, 4), ["matmul", "f32[3,4]"]),
    ("matmul_0d", lambda: mnp.matmul(ones(), ones(3)), ["matmul", "f32[]"]),
    ("reshape", lambda: mnp.reshape(ones(3, 4), (5,)), ["reshape", "f32[3,4]", "[5]"]),
    ("concatenate", lambda: mnp.concatenate([ones(3, 4), ones(2, 3)]),
     ["concatenate", "f32[3,4]", "f32[2,3]"]),
    ("stack", lambda: mnp.stack([ones(3), ones(4)]), ["stack", "f32[3]", "f32[4]"]),
    ("transpose", lambda: mnp.transpose(ones(3, 4), (0, 0)), ["transpose", "f32[3,4]"]),
    ("broadcast_to", lambda: mnp.broadcast_to(ones(3), (4,)), ["broadcast_to", "f32[3]"]),
    ("squeeze", lambda: mnp.squeeze(ones(3, 4), 0), ["squeeze", "f32[3,4]"]),
    ("moveaxis", lambda: mnp.moveaxis(ones(2, 3), 0, 5), ["moveaxis", "f32[2,3]"]),
    ("split", lambda: mnp.split(ones(5), 2), ["split", "f32[5]"]),
    ("einsum", lambda: mnp.einsum("ij,jk", ones(2, 3), ones(4, 2)),
     ["einsum", "f32[2,3]", "f32[4,2]"]),
    ("einsum_rank", lambda: mnp.einsum("ijk", ones(2, 3)), ["einsum", "f32[2,3]"]),
    ("repeat", lambda: mnp.repeat(ones(3), [1, 2]), ["repeat", "f32[3]"]),
    ("pad", lambda: mnp.pad(ones(3, 4), ((1, 1), (1, 1), (1, 1))), ["pad"]),
    ("where", lambda: mnp.where(ones(3) > 0, ones(3), ones(4)), ["f32[3]", "f32[4]"]),
    ("max_empty", lambda: mnp.max(ones(0, 3), axis=0), ["reduce_max", "f32[0,3]"]),
    ("cross", lambda: mnp.cross(ones(4), ones(4)), ["cross", "f32[4]"]),
    ("average", lambda: mnp.average(ones(3, 4), axis=1, weights=ones(3)),
     ["average", "f32[3]", "f32[3,4]"]),
]


@pytest.mark.parametrize("name,fn,parts", SHAPE_ERRORS, ids=[c[0] for c in SHAPE_ERRORS])
def test_shape_errors_name_op_and_shapes(name, fn, parts):
    with pytest.raises(ValueError) as e:
        fn()
    for p in parts:
        assert p in str(e.value), f"{p!r} not in {str(e.value)!r}"


TYPE_ERRORS = [
    ("bitwise_float", lambda: mnp.bitwise_and(ones(2), ones(2)), ["f32[2]"]),
    ("unsupported dtype", lambda: mnp.ones(3, "datetime64[s]"), ["datetime64"]),
    ("not_array", lambda: mnp.sin("a"), ["sin", "str"]),
    ("axis_type", lambda: mnp.sum(ones(3), axis=1.5), ["sum", "axis"]),
    ("arange_traced", lambda: mnp.arange(ones()), ["arange"]),
    ("grad_int", lambda: mx.grad(lambda x: x.sum())(mnp.arange(3)), ["grad", "i32[3]"]),
    ("grad_nonscalar", lambda: mx.grad(lambda x: x)(ones(3)), ["grad", "f32[3]"]),
    ("jit_static_unhashable", lambda: mx.jit(lambda x, s: x, static_argnums=1)(ones(2), [1]),
     ["static", "hashable"]),
    ("jit_arg_type", lambda: mx.jit(lambda x: x)("a"), ["jit", "str"]),
]


@pytest.mark.parametrize("name,fn,parts", TYPE_ERRORS, ids=[c[0] for c in TYPE_ERRORS])
def test_type_errors(name, fn, parts):
    with pytest.raises(TypeError) as e:
        fn()
    for p in parts:
        assert p in str(e.value), f"{p!r} not in {str(e.value)!r}"


def test_argnums_and_vmap_errors():
    with pytest.raises(ValueError, match="argnums 3 is out of range"):
        mx.grad(lambda x: x.sum(), argnums=3)(ones(3))
    with pytest.raises(ValueError, match="inconsistent sizes.*size 3.*size 4"):
        mx.vmap(lambda x, y: x + y)(ones(3), ones(4))
    with pytest.raises(ValueError, match="in_axes 2 is out of range.*f32\\[3\\]"):
        mx.vmap(lambda x: x, in_axes=2)(ones(3))


@pytest.mark.parametrize("name,call", [
    ("grad", lambda: mx.grad(lambda x: x.sum(), argnums=1.5)(ones(3))),
    ("jacfwd", lambda: mx.jacfwd(lambda x: x, argnums="0")(ones(3))),
    ("jit\\(<lambda>\\)", lambda: mx.jit(lambda x, s: x, static_argnums=1.5)),
    ("jit\\(<lambda>\\)", lambda: mx.jit(lambda x: x, donate_argnums=[True])),
    ("make_jaxpr", lambda: mx.make_jaxpr(lambda x: x, static_argnums=1.5)),
    ("make_graph", lambda: mx.make_graph(lambda x: x, 1.5))])
def test_argnums_that_are_not_ints_name_the_transform(name, call):
    """One check for every transform's argnums / static_argnums / donate_argnums: a clear
    TypeError naming it, not Python's "'float' object is not iterable"."""
    with pytest.raises(TypeError, match=f"{name}: .*argnums must be an int or a sequence "
                                        "of ints, got"):
        call()


def test_nothing_half_applied():
    """A failing op leaves no trace: the jit cache and inputs are untouched."""
    f = mx.jit(lambda x, y: x + y)
    with pytest.raises(ValueError):
        f(ones(3), ones(4))
    assert f.cache_info().size == 0
    assert f(ones(3), ones(3)).tolist() == [2.0, 2.0, 2.0]


# --- concretization --------------------------------------------------------------------------
def test_bool_of_traced_names_argument():
    def loss(w, x):
        if x.sum() > 0:
            return w
        return -w
    with pytest.raises(mx.errors.ConcretizationError) as e:
        mx.jit(loss)(ones(2), ones(2))
    msg = str(e.value)
    assert "bool()" in msg and "bool[]" in msg and "jit(loss)" in msg
    assert "argument 'x'" in msg and "static_argnames=('x',)" in msg and "mx.lax.cond" in msg
    assert "'w'" not in msg


@pytest.mark.parametrize("conv", [float, int, lambda v: v.item()], ids=["float", "int", "item"])
def test_scalar_conversions_of_traced(conv):
    def f(a, b):
        return a * conv(b)
    with pytest.raises(mx.errors.ConcretizationError, match="argument 'b'"):
        mx.jit(f)(ones(2), ones())


def test_static_shape_of_traced_names_argument():
    with pytest.raises(mx.errors.ConcretizationError) as e:
        mx.jit(lambda n: mnp.zeros(n))(3)
    assert "zeros" in str(e.value) and "argument 'n'" in str(e.value)


def test_concretization_is_a_type_error_and_fix_works():
    assert issubclass(mx.errors.ConcretizationError, TypeError)
    f = mx.jit(lambda x, n: x * mnp.ones(n), static_argnames=("n",))
    assert f(2.0, n=3).tolist() == [2.0, 2.0, 2.0]


def test_numpy_of_traced():
    with pytest.raises(mx.errors.ConcretizationError, match="traced f32\\[2\\]"):
        mx.jit(lambda x: __import__("numpy").asarray(x))(ones(2))


def test_vmap_bool_of_batched():
    with pytest.raises(mx.errors.ConcretizationError, match="vmap"):
        mx.vmap(lambda x: x if x > 0 else -x)(ones(3))
