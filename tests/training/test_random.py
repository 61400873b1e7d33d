"""mx.random: determinism across eager / jit / vmap, distribution sanity, JAX bit-equality."""
import numpy as np
import pytest

import mirax as mx
import mirax.numpy as mnp
import mirax.random as mr

SAMPLERS = {
    "uniform": lambda k: mr.uniform(k, (3, 4)),
    "uniform_range": lambda k: mr.uniform(k, (5,), minval=-2.0, maxval=3.0),
    "normal": lambda k: mr.normal(k, (3, 4)),
    "normal_f64": lambda k: mr.normal(k, (6,), mnp.float64),
    "truncated_normal": lambda k: mr.truncated_normal(k, -1.0, 0.5, (7,)),
    "bernoulli": lambda k: mr.bernoulli(k, 0.3, (9,)),
    "randint": lambda k: mr.randint(k, (8,), 2, 11),
    "categorical": lambda k: mr.categorical(k, mnp.asarray([[0.0, 1.0, 2.0], [3.0, 0.0, 0.0]]),
                                            shape=(4, 2)),
    "permutation": lambda k: mr.permutation(k, 10),
    "permutation_rows": lambda k: mr.permutation(k, mnp.arange(12).reshape(4, 3)),
    "split": lambda k: mr.split(k, 3),
    "fold_in": lambda k: mr.fold_in(k, 17),
    "bits": lambda k: mr.bits(k, (5,)),
    "gumbel": lambda k: mr.gumbel(k, (4,)),
    "exponential": lambda k: mr.exponential(k, (5,)),
    "laplace": lambda k: mr.laplace(k, (5,)),
    "choice": lambda k: mr.choice(k, 10, (2, 2), replace=False),
    "choice_p": lambda k: mr.choice(k, mnp.arange(8.0), (5,), p=mnp.arange(1.0, 9.0) / 36),
}


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_same_key_same_numbers_eager_jit_vmap(name):
    f = SAMPLERS[name]
    keys = mr.split(mr.key(7), 3)
    eager = np.stack([np.asarray(f(keys[i])) for i in range(3)])
    np.testing.assert_array_equal(np.asarray(mx.jit(f)(keys[1])), eager[1])
    np.testing.assert_array_equal(np.asarray(mx.vmap(f)(keys)), eager)
    np.testing.assert_array_equal(np.asarray(mx.jit(mx.vmap(f))(keys)), eager)


def test_keys_are_uint32_pairs_and_split_differs():
    k = mr.key(0)
    assert k.shape == (2,) and k.dtype == np.uint32
    np.testing.assert_array_equal(np.asarray(mr.key(2 ** 32 + 5)), [1, 5])
    a, b = mr.split(k)
    assert not np.array_equal(np.asarray(a), np.asarray(b))
    assert not np.array_equal(np.asarray(mr.normal(a, (4,))), np.asarray(mr.normal(b, (4,))))
    assert not np.array_equal(np.asarray(mr.fold_in(k, 1)), np.asarray(mr.fold_in(k, 2)))
    np.testing.assert_array_equal(np.asarray(mr.key(mnp.asarray(9))), np.asarray(mr.key(9)))


def test_bad_key_is_a_clear_error():
    with pytest.raises(TypeError, match="random.normal: expected a key"):
        mr.normal(mnp.zeros(3), (2,))
    with pytest.raises(TypeError, match="floating dtype"):
        mr.uniform(mr.key(0), (2,), mnp.int32)


def test_distributions_look_right():
    k = mr.key(1)
    u = np.asarray(mr.uniform(k, (20000,)))
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.01
    z = np.asarray(mr.normal(k, (20000,)))
    assert abs(z.mean()) < 0.03 and abs(z.std() - 1) < 0.03
    t = np.asarray(mr.truncated_normal(k, -0.5, 1.0, (5000,)))
    assert -0.5 < t.min() and t.max() < 1.0
    b = np.asarray(mr.bernoulli(k, 0.25, (20000,)))
    assert b.dtype == np.bool_ and abs(b.mean() - 0.25) < 0.01
    r = np.asarray(mr.randint(k, (20000,), -3, 4))
    assert r.dtype == np.int32 and r.min() == -3 and r.max() == 3
    assert np.all(np.abs(np.bincount(r + 3) / 20000 - 1 / 7) < 0.01)
    p = np.asarray(mr.permutation(k, 50))
    np.testing.assert_array_equal(np.sort(p), np.arange(50))
    logits = np.log(np.array([0.1, 0.6, 0.3], np.float32))
    c = np.asarray(mr.categorical(k, logits, shape=(20000,)))
    np.testing.assert_allclose(np.bincount(c) / 20000, [0.1, 0.6, 0.3], atol=0.015)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_uniform_dtypes(dtype):
    u = mr.uniform(mr.key(3), (100,), getattr(mnp, dtype))
    assert u.dtype == getattr(mnp, dtype)
    v = np.asarray(u).astype(np.float64)
    assert 0 <= v.min() and v.max() < 1


def test_bits_match_jax_golden_values():
    # printed by jax 0.10 (jax.random with its default partitionable threefry)
    k = mr.key(42)
    np.testing.assert_array_equal(np.asarray(mr.split(k)),
                                  [[1832780943, 270669613], [64467757, 2916123636]])
    np.testing.assert_array_equal(np.asarray(mr.fold_in(k, 9)), [1128875147, 2463678267])
    np.testing.assert_array_equal(np.asarray(mr.uniform(k, (4,))),
                                  np.array([0.48870956897735596, 0.6797971725463867,
                                            0.6162714958190918, 0.5610160827636719], np.float32))
    np.testing.assert_array_equal(np.asarray(mr.randint(k, (6,), -5, 1000)),
                                  [184, 514, 736, 539, 804, 979])
    np.testing.assert_array_equal(np.asarray(mr.permutation(k, 8)), [7, 4, 2, 5, 3, 6, 0, 1])


@pytest.mark.slow
def test_bits_match_jax():
    jax = pytest.importorskip("jax")
    jr = jax.random
    k, jk = mr.key(42), jr.PRNGKey(42)
    np.testing.assert_array_equal(np.asarray(mr.split(k, 4)), np.asarray(jr.split(jk, 4)))
    np.testing.assert_array_equal(np.asarray(mr.fold_in(k, 9)), np.asarray(jr.fold_in(jk, 9)))
    np.testing.assert_array_equal(np.asarray(mr.uniform(k, (3, 5))),
                                  np.asarray(jr.uniform(jk, (3, 5))))
    np.testing.assert_array_equal(np.asarray(mr.bernoulli(k, 0.4, (30,))),
                                  np.asarray(jr.bernoulli(jk, 0.4, (30,))))
    np.testing.assert_array_equal(np.asarray(mr.randint(k, (20,), -5, 1000)),
                                  np.asarray(jr.randint(jk, (20,), -5, 1000)))
    np.testing.assert_array_equal(np.asarray(mr.permutation(k, 2000)),
                                  np.asarray(jr.permutation(jk, 2000)))
    logits = np.log(np.array([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]], np.float32))
    np.testing.assert_array_equal(np.asarray(mr.categorical(k, logits, shape=(6, 2))),
                                  np.asarray(jr.categorical(jk, logits, shape=(6, 2))))
    # erf_inv differs from XLA's in the last bits
    np.testing.assert_allclose(np.asarray(mr.normal(k, (50,))), np.asarray(jr.normal(jk, (50,))),
                               rtol=1e-5, atol=1e-6)


def test_exponential_laplace_choice_match_jax():
    jax = pytest.importorskip("jax")
    jr = jax.random
    k, jk = mr.key(3), jr.PRNGKey(3)
    for name in ("exponential", "laplace"):
        np.testing.assert_allclose(np.asarray(getattr(mr, name)(k, (40,))),
                                   np.asarray(getattr(jr, name)(jk, (40,))), rtol=1e-6)
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    p = np.array([0.1, 0.2, 0.3, 0.4], np.float32)
    cases = [(10, (4,), {}), (10, (2, 2), {"replace": False}), (x, (2,), {"axis": 1}),
             (x, (2, 1), {"replace": False}), (4, (8,), {"p": p}),
             (4, (3,), {"replace": False, "p": p}),
             (x, (2, 2), {"p": np.array([0.5, 0.2, 0.3], np.float32)})]
    for a, shape, kw in cases:
        np.testing.assert_array_equal(np.asarray(mr.choice(k, a, shape, **kw)),
                                      np.asarray(jr.choice(jk, a, shape, **kw)))
    with pytest.raises(ValueError, match="without replacement"):
        mr.choice(k, 3, (4,), replace=False)
    with pytest.raises(ValueError, match="p must be a vector"):
        mr.choice(k, 3, (2,), p=np.ones(4) / 4)
