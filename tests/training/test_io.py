"""mx.io: safetensors checkpoints (round trips, structure, checks against `like`) and DLPack
interop with NumPy, PyTorch and JAX."""
import collections

import numpy as np
import pytest

import mirax as mx
import mirax.numpy as mnp
from mirax import nn

pytest.importorskip("safetensors")


def _tree():
    return {"layers": [{"w": mnp.ones((2, 3)), "b": mnp.zeros((3,))},
                       {"w": mnp.asarray(np.arange(6.0).reshape(3, 2)), "b": None}],
            "step": mnp.asarray(7), "scale": (mnp.asarray(np.float16(0.5)),
                                              mnp.asarray([1.0, 2.0], mnp.bfloat16)),
            "mask": mnp.asarray([True, False])}


def _same(a, b):
    la, ta = mx.tree.flatten(a)
    lb, tb = mx.tree.flatten(b)
    assert ta == tb
    for x, y in zip(la, lb):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_round_trip_without_like(tmp_path):
    t = _tree()
    mx.io.save(tmp_path / "ck.safetensors", t)
    _same(mx.io.load(tmp_path / "ck.safetensors"), t)


def test_round_trip_module_with_like_and_names(tmp_path):
    model = nn.Sequential([nn.Linear(3, 4, key=mx.random.key(0)), nn.relu, nn.LayerNorm(4)])
    path = tmp_path / "m.safetensors"
    mx.io.save(path, model)
    like = nn.Sequential([nn.Linear(3, 4, key=mx.random.key(1)), nn.relu, nn.LayerNorm(4)])
    back = mx.io.load(path, like=like)
    assert isinstance(back, nn.Sequential)
    _same(back, model)
    # tensors carry PyTorch-style dotted names; without like, custom nodes become dicts
    from safetensors.numpy import load_file
    assert set(load_file(path)) == {"layers.0.weight", "layers.0.bias", "layers.2.weight",
                                    "layers.2.bias"}
    plain = mx.io.load(path)
    np.testing.assert_array_equal(np.asarray(plain["layers"][0]["weight"]),
                                  np.asarray(model.layers[0].weight))


def test_optimizer_state_round_trip(tmp_path):
    params = {"w": mnp.ones((2,))}
    opt = mx.optim.adam(0.1)
    state = opt.init(params)
    _, state = opt.update({"w": mnp.ones((2,))}, state, params)
    mx.io.save(tmp_path / "s.safetensors", state)
    back = mx.io.load(tmp_path / "s.safetensors", like=opt.init(params))
    _same(back, state)
    assert int(back[0].count) == 1


def test_like_mismatches_name_the_path(tmp_path):
    path = tmp_path / "ck.safetensors"
    mx.io.save(path, {"a": {"w": mnp.ones((2, 3))}, "b": mnp.zeros((2,))})
    with pytest.raises(ValueError, match=r"\['a'\]\['w'\] is f32\[2,3\] in the file but "
                                         r"f32\[3,2\] in `like`"):
        mx.io.load(path, like={"a": {"w": mnp.ones((3, 2))}, "b": mnp.zeros((2,))})
    with pytest.raises(ValueError, match=r"\['b'\] is f32\[2\] in the file but f64\[2\]"):
        mx.io.load(path, like={"a": {"w": mnp.ones((2, 3))},
                               "b": mnp.zeros((2,), mnp.float64)})
    with pytest.raises(ValueError, match=r"no tensor for \['c'\]"):
        mx.io.load(path, like={"a": {"w": mnp.ones((2, 3))}, "c": mnp.zeros((2,))})
    with pytest.raises(ValueError, match="have no place"):
        mx.io.load(path, like={"a": {"w": mnp.ones((2, 3))}})


def test_name_collisions_and_custom_nodes(tmp_path):
    with pytest.raises(ValueError, match="collide"):
        mx.io.save(tmp_path / "x.safetensors", {"a.b": mnp.ones(1), "a": {"b": mnp.ones(1)}})
    P = collections.namedtuple("P", "x y")
    t = P(mnp.ones((2,)), [mnp.zeros((1,))])
    mx.io.save(tmp_path / "p.safetensors", t)
    _same(mx.io.load(tmp_path / "p.safetensors", like=t), t)
    assert set(mx.io.load(tmp_path / "p.safetensors")) == {"x", "y"}


def test_foreign_file_loads_as_flat_dict(tmp_path):
    from safetensors.numpy import save_file
    save_file({"encoder.weight": np.ones((2, 2), np.float32)}, str(tmp_path / "f.safetensors"))
    out = mx.io.load(tmp_path / "f.safetensors")
    assert list(out) == ["encoder.weight"] and out["encoder.weight"].dtype == np.float32


def test_torch_reads_our_bfloat16(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file
    mx.io.save(tmp_path / "b.safetensors", {"w": mnp.asarray([1.5, -2.0], mnp.bfloat16)})
    t = load_file(str(tmp_path / "b.safetensors"))["w"]
    assert t.dtype == torch.bfloat16 and t.tolist() == [1.5, -2.0]


def test_dlpack_numpy_and_torch():
    torch = pytest.importorskip("torch")
    x = mx.asarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    t = torch.from_dlpack(x)
    assert t.shape == (2, 3) and t.dtype == torch.float32
    np.testing.assert_array_equal(t.numpy(), np.asarray(x))
    t2 = torch.utils.dlpack.from_dlpack(mx.to_dlpack(x))
    np.testing.assert_array_equal(t2.numpy(), np.asarray(x))
    np.testing.assert_array_equal(np.from_dlpack(x), np.asarray(x))
    for dt, want in [(torch.float64, np.float64), (torch.int64, np.int64),
                     (torch.bfloat16, mnp.bfloat16)]:
        a = mx.asarray(torch.arange(4).to(dt))
        assert a.dtype == want
        np.testing.assert_array_equal(np.asarray(a).astype(np.float64), [0, 1, 2, 3])
    y = mx.from_dlpack(torch.ones(3, requires_grad=True).detach())
    assert float(mnp.sum(y)) == 3.0
    with pytest.raises(TypeError, match="to_dlpack"):
        mx.to_dlpack(np.ones(2))


def test_dlpack_jax():
    jax = pytest.importorskip("jax")
    jx = jax.numpy.arange(5.0)
    a = mx.asarray(jx)
    assert a.dtype == np.float32 and a.shape == (5,)
    back = jax.numpy.from_dlpack(mx.asarray(np.arange(3.0, dtype=np.float32)))
    np.testing.assert_array_equal(np.asarray(back), [0.0, 1.0, 2.0])


def test_complex_round_trip_exact(tmp_path):
    """safetensors has no complex dtype: complex leaves go as (real, imag) pairs and come
    back bit for bit, with and without `like`."""
    rng = np.random.default_rng(0)
    t = {"z64": mnp.asarray((rng.normal(size=(2, 3)) + 1j * rng.normal(size=(2, 3))
                             ).astype(np.complex64)),
         "z128": mnp.asarray(np.array(np.pi - np.e * 1j)),
         "w": mnp.ones(2)}
    path = tmp_path / "c.safetensors"
    mx.io.save(path, t)
    _same(mx.io.load(path), t)
    _same(mx.io.load(path, like=t), t)


def test_dlpack_complex():
    jax = pytest.importorskip("jax")
    z = np.array([1 + 2j, -3j], np.complex64)
    a = mx.asarray(jax.numpy.asarray(z))
    assert a.dtype == np.complex64
    np.testing.assert_array_equal(np.asarray(a), z)
    back = jax.numpy.from_dlpack(mnp.asarray(z) * 2)
    np.testing.assert_array_equal(np.asarray(back), 2 * z)
    np.testing.assert_array_equal(np.from_dlpack(mnp.asarray(z)), z)
