"""mx.testing: derivative checks against float64 central differences (after HIPS
autograd's and JAX's `check_grads`).

`check_grads(f, args, order)` casts float arguments to float64, builds the numerical
Jacobian of f column by column (2 evaluations per input entry), and compares it with
  fwd: jvp along each basis direction (the Jacobian's columns),
  rev: vjp of each basis cotangent (the Jacobian's rows).
Higher orders check the derivative functions recursively, as JAX does: for fwd,
x -> jvp(f, x, v)[1] and for rev, x -> vjp(f, x)[1](u) with fixed random v, u, each checked
again in every mode up to `order`. Basis directions make every entry of the Jacobian
checked (and nameable on failure), so this is meant for small test inputs.
"""
from __future__ import annotations

import numpy as np

from mirax.core import dtypes, tree
from mirax.ops.common import operand
from mirax.ops.elementwise import convert_element_type
from mirax.ops.creation import asarray
from mirax.interpreters.jvp import jvp_flat
from mirax.interpreters.vjp import vjp_flat

__all__ = ["check_grads", "numerical_grad", "numerical_jacobian"]


def _to64(x):
    x = operand(x, "check_grads")
    if dtypes.is_float(x.dtype) and x.dtype != np.float64:
        return convert_element_type(x, np.float64)
    return x


def _host(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def _flat_fn(f, args):
    """f as a function of the flat float leaves of args -> flat float output leaves."""
    leaves, in_tree = tree.flatten(list(args))
    leaves = [_to64(x) for x in leaves]
    diff = [i for i, x in enumerate(leaves) if dtypes.is_float(x.dtype)]
    paths = [f"args{tree.keystr(p)}" for p, _ in tree.leaves_with_path(list(args))]

    def flat(*xs):
        full = list(leaves)
        for i, x in zip(diff, xs):
            full[i] = x
        out = f(*tree.unflatten(in_tree, full))
        return [o for o in (_to_operand(v) for v in tree.leaves(out))]
    return flat, [leaves[i] for i in diff], [paths[i] for i in diff]


def _to_operand(v):
    return operand(v, "check_grads")


def numerical_jacobian(flat, xs, eps) -> list[list[np.ndarray]]:
    """J[o][i]: array of shape out_o.shape + x_i.shape, by float64 central differences."""
    base = [_host(o) for o in flat(*xs)]
    jac = [[np.zeros(b.shape + tuple(x.shape)) for x in xs] for b in base]
    for i, x in enumerate(xs):
        xv = _host(x)
        for idx in np.ndindex(*xv.shape):
            def at(delta):
                v = xv.copy()
                v[idx] += delta
                args = list(xs)
                args[i] = asarray(v.astype(x.dtype))
                return [_host(o) for o in flat(*args)]
            plus, minus = at(eps), at(-eps)
            for o, (p, m) in enumerate(zip(plus, minus)):
                jac[o][i][(...,) + idx] = (p - m) / (2 * eps)
    return jac


def numerical_grad(f, args, eps: float = 1e-4):
    """The gradient of a scalar f at args (a tuple), by float64 central differences;
    shaped like args (a tuple of pytrees, integer leaves get None)."""
    args = tuple(args) if isinstance(args, (tuple, list)) else (args,)
    flat, xs, _ = _flat_fn(f, args)
    outs = flat(*xs)
    if len(outs) != 1 or tuple(outs[0].shape) != ():
        raise TypeError("numerical_grad: f must return a scalar; use numerical_jacobian")
    jac = numerical_jacobian(flat, xs, eps)[0]
    leaves, in_tree = tree.flatten(list(args))
    it = iter(jac)
    grads = [next(it) if dtypes.is_float(_to64(x).dtype) else None for x in leaves]
    return tuple(tree.unflatten(in_tree, grads))


def _fmt_idx(idx) -> str:
    return "[" + ",".join(map(str, idx)) + "]" if idx else "[]"


def _compare(kind, order, auto, num, o, path, in_ndim, atol, rtol):
    err = np.abs(auto - num)
    tol = atol + rtol * np.abs(num)
    bad = np.where(np.isnan(auto) != np.isnan(num), np.inf, err - tol)
    if bad.size == 0 or np.nanmax(bad) <= 0:
        return
    k = np.unravel_index(int(np.nanargmax(bad)), bad.shape)
    n_out = bad.ndim - in_ndim
    raise AssertionError(
        f"check_grads: order-{order} {kind}-mode derivative of output {o} w.r.t. argument "
        f"{path} is wrong at output index {_fmt_idx(k[:n_out])}, input index "
        f"{_fmt_idx(k[n_out:])}: autodiff gives {float(auto[k])!r}, finite differences "
        f"give {float(num[k])!r} (|diff| {float(err[k]):.3g} > atol {atol:g} + rtol {rtol:g}"
        " * |fd|)")


def _check_once(f, args, modes, order, eps, atol, rtol):
    flat, xs, paths = _flat_fn(f, args)
    if not xs:
        return
    num = numerical_jacobian(flat, xs, eps)
    outs = flat(*xs)
    fouts = [k for k, o in enumerate(outs) if dtypes.is_float(o.dtype)]
    if "fwd" in modes:
        auto = [[np.zeros_like(j) for j in row] for row in num]
        for i, x in enumerate(xs):
            size = int(np.prod(x.shape))
            for flat_idx in range(size):
                e = np.zeros(size)
                e[flat_idx] = 1.0
                ts = [_as(e.reshape(tuple(x.shape)), x) if j == i else _zero_ct(y)
                      for j, y in enumerate(xs)]
                _, touts = jvp_flat(flat, list(xs), ts)
                idx = np.unravel_index(flat_idx, tuple(x.shape))
                for o in fouts:
                    t = touts[o]
                    auto[o][i][(...,) + idx] = 0.0 if t is None else _host(t)
        for o in fouts:
            for i in range(len(xs)):
                _compare("fwd", order, auto[o][i], num[o][i], o, paths[i], xs[i].ndim,
                         atol, rtol)
    if "rev" in modes:
        _, bwd = vjp_flat(flat, list(xs))
        for o in fouts:
            shape = tuple(outs[o].shape)
            rows = [np.zeros(num[o][i].shape) for i in range(len(xs))]
            for idx in np.ndindex(*shape):
                cts = [_zero_ct(p) for p in outs]
                c = np.zeros(shape)
                c[idx] = 1.0
                cts[o] = _as(c, outs[o])
                for i, g in enumerate(bwd(cts)):
                    rows[i][idx] = 0.0 if g is None else _host(g)
            for i in range(len(xs)):
                _compare("rev", order, rows[i], num[o][i], o, paths[i], xs[i].ndim,
                         atol, rtol)


def _as(v: np.ndarray, like):
    return asarray(v.astype(like.dtype if dtypes.is_float(like.dtype) else np.float64))


def _zero_ct(o):
    return _as(np.zeros(tuple(o.shape)), o)


def _random_like(x, rng):
    return _as(rng.standard_normal(tuple(x.shape)), x)


def check_grads(f, args, order: int = 2, modes=("fwd", "rev"), eps=None, atol=None,
                rtol=None, rng_seed: int = 0):
    """Check every derivative of f at args (a tuple) up to `order` in `modes` against
    float64 central differences; raise AssertionError naming the worst entry."""
    if isinstance(modes, str):
        modes = (modes,)
    for m in modes:
        if m not in ("fwd", "rev"):
            raise ValueError(f"check_grads: unknown mode {m!r}; use 'fwd' and/or 'rev'")
    args = tuple(args) if isinstance(args, (tuple, list)) else (args,)
    eps = 1e-4 if eps is None else eps
    atol = 1e-5 if atol is None else atol
    rtol = 1e-5 if rtol is None else rtol
    rng = np.random.default_rng(rng_seed)
    _check_order(f, args, order, 1, modes, eps, atol, rtol, rng)


def _check_order(f, args, order, level, modes, eps, atol, rtol, rng):
    _check_once(f, args, modes, level, eps, atol, rtol)
    if level >= order:
        return
    flat, xs, _ = _flat_fn(f, args)
    outs = flat(*xs)
    if "fwd" in modes:
        v = [_random_like(x, rng) for x in xs]

        def f_jvp(*ys):
            _, t = jvp_flat(flat, list(ys), v)
            return [_zero_ct(o) if ti is None else ti for ti, o in zip(t, outs)]
        _check_order(f_jvp, tuple(xs), order, level + 1, modes, eps, atol, rtol, rng)
    if "rev" in modes:
        u = [_random_like(o, rng) if dtypes.is_float(o.dtype) else _zero_ct(o) for o in outs]

        def f_vjp(*ys):
            _, bwd = vjp_flat(flat, list(ys))
            return bwd(u)
        _check_order(f_vjp, tuple(xs), order, level + 1, modes, eps, atol, rtol, rng)
