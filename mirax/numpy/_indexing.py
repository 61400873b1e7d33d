"""NumPy indexing on mirax: `x[idx]`, `x.at[idx].set/add/mul/min/max/get`, take,
take_along_axis, put_along_axis, nonzero, argwhere, flatnonzero, compress, diagonal, diag,
trace, triu, tril.

`x[idx]` is parsed once into a plan: basic parts (ints, slices, None, Ellipsis) lower to one
`slice` (+ `rev` for negative steps) and a final transpose/reshape, a traced scalar index
to `dynamic_slice`, and only integer-array / boolean-mask parts to `gather`. Eager
`x[0]`, `x[1:3]`, `x[:, None]` on a concrete array skip the plan entirely (NumPy view).

Out-of-bounds semantics follow JAX: static ints, integer arrays and traced scalars are
clamped when reading (`x[7]` of a length-5 axis is `x[4]`, `x[-7]` is `x[0]`; or filled with
`x.at[idx].get(mode="fill")`), dropped when updating (`x.at[idx]`); an axis of size 0 has
no element to clamp to, so indexing it with an int raises IndexError; `take` /
`take_along_axis` default to mode "fill" (NaN for floats).
Boolean masks need concrete values (their result shape depends on the data): under
jit / vmap they raise ConcretizationError; use `where` or `nonzero(..., size=)` there.
"""
from __future__ import annotations

import builtins

import numpy as np

from mirax.core import dtypes
from mirax.core.array import Array
from mirax.core.errors import ConcretizationError, ShapeError
from mirax.core.trace import Tracer, aval_of, busy as _busy, state as _state
from mirax.ops import elementwise as ew
from mirax.ops import indexing as ix
from mirax.ops import shape as sh
from mirax.ops.common import normalize_axis, operand, short
from mirax.ops.common import cast
from mirax.numpy._core import sum as _sum

__all__ = ["take", "take_along_axis", "put_along_axis", "nonzero", "argwhere", "flatnonzero",
           "compress", "diagonal", "diag", "trace", "triu", "tril", "getitem"]

_BASIC_TYPES = (int, np.integer, slice, type(None), type(Ellipsis))


# --- index parsing -------------------------------------------------------------------------
def _concrete(x):
    """A NumPy value for x if it is concrete (also through jvp/grad tracers), else None."""
    while isinstance(x, Tracer):
        if not hasattr(x, "primal"):
            return None
        x = x.primal
    return np.asarray(x) if isinstance(x, Array) else x


def _classify(i, op):
    if i is None:
        return "new", None
    if i is Ellipsis:
        return "ellipsis", None
    if isinstance(i, slice):
        return "slice", i
    if isinstance(i, (bool, np.bool_)):
        return "bool0", bool(i)
    if isinstance(i, (int, np.integer)):
        return "int", int(i)
    if isinstance(i, (Array, Tracer)):
        kind = i.dtype
        if kind == np.bool_:
            return "mask", i
        if not dtypes.is_int(kind):
            raise IndexError(f"{op}: indices must be integers or booleans, got {short(i)}")
        if i.ndim == 0:
            return ("dyn", i) if isinstance(i, Tracer) else ("int", int(i))
        return "array", i
    if isinstance(i, (list, tuple)) and builtins.any(isinstance(e, Tracer) for e in i):
        return _classify(sh.stack([operand(e, op) for e in i]), op)   # [i, j] of traced ints
    if isinstance(i, (np.ndarray, list, tuple)):
        a = np.asarray(i)
        if a.size == 0 and a.dtype.kind == "f":
            a = a.astype(np.int32)
        if a.dtype == np.bool_:
            return "mask", a
        if a.dtype.kind not in "iu":
            raise IndexError(f"{op}: indices must be integers or booleans, got "
                             f"{a.dtype} array")
        return ("int", int(a)) if a.ndim == 0 else ("array", a)
    raise IndexError(f"{op}: invalid index of type {type(i).__name__} (use ints, slices, None, "
                     "Ellipsis, integer arrays or boolean masks)")


def _int_array(a, n, op):
    """An int32 operand of positions along an axis of size n (negatives wrap, as NumPy)."""
    if isinstance(a, np.ndarray):
        return Array(np.where(a < 0, a + n, a).astype(np.int32))
    a = a if a.dtype == np.int32 else ew.convert_element_type(a, np.int32)
    if dtypes.is_int(a.dtype) and np.dtype(a.dtype).kind == "i":
        a = ew.select(ew.lt(a, 0), ew.add(a, n), a)
    return a


class _Plan:
    """What `x[idx]` does, axis by axis (see `_parse`)."""

    def __init__(self, x):
        self.x = x                       # x, with unit axes inserted for scalar-bool indices
        self.orig_shape = tuple(x.shape)
        self.info = {}                   # axis -> ("slice", start, stop, step, n_out) |
        #                                  ("int", i) | ("dyn", i) | ("adv", j)
        self.out = []                    # output dims: ("new",) | ("axis", a) | ("batch",)
        self.adv_axes, self.adv_arrays = [], []
        self.batch = ()


def _parse(x, idx, op="getitem", traced_as_array=False):
    if not isinstance(idx, tuple):
        idx = (idx,)
    items = [_classify(i, op) for i in idx]
    has_adv = any(k in ("array", "mask", "bool0") for k, _ in items)
    used = builtins.sum(v.ndim if k == "mask" else 0 if k in ("new", "ellipsis", "bool0")
                        else 1 for k, v in items)
    n_ell = x.ndim - used
    if [k for k, _ in items].count("ellipsis") > 1:
        raise IndexError(f"{op}: an index can only have a single ellipsis ('...')")
    if n_ell < 0:
        raise IndexError(f"{op}: too many indices for {short(x)}: {used} were given")
    expanded = []
    for k, v in items:
        if k == "ellipsis":
            expanded += [("slice", slice(None))] * n_ell
        else:
            expanded.append((k, v))
    if "ellipsis" not in [k for k, _ in items]:
        expanded += [("slice", slice(None))] * n_ell
    plan, a, adv_pos = _Plan(x), 0, []
    for pos, (k, v) in enumerate(expanded):
        if k == "new":
            plan.out.append(("new",))
            continue
        if k == "bool0":                  # x[True] = x[None][[0]]; x[False] = x[None][[]]
            plan.x = sh.expand_dims(plan.x, a)
            k, v = "array", np.zeros(1 if v else 0, np.int32)
        n = plan.x.shape[a]
        if k == "slice":
            plan.info[a] = ("slice",) + _static_slice(v, n, a, plan.x, op)
            plan.out.append(("axis", a))
        elif k == "int":
            if not -n <= v < n:
                if n == 0:
                    raise IndexError(f"{op}: index {v} is out of bounds for axis {a} with size "
                                     f"0 (indexing {short(plan.x)})")
                if op == "getitem" and not traced_as_array:
                    v = builtins.min(builtins.max(v, -n), n - 1)   # a read clamps (JAX)
                else:   # through the gather / scatter, which fills, drops or clips it
                    k, v = "array", np.asarray(v)
            if k == "int" and has_adv:
                k, v = "array", np.asarray(v % n)
            elif k == "int":
                plan.info[a] = ("int", v % n)
        elif k == "dyn":
            if has_adv or traced_as_array:   # a gather, which can fill out of bounds
                k = "array"
            else:
                plan.info[a] = ("dyn", _int_array(v, n, op))
        if k == "mask":
            arrays = _mask_positions(v, plan.x, a, op)
            for j, arr in enumerate(arrays):
                plan.info[a + j] = ("adv", len(plan.adv_arrays))
                plan.adv_axes.append(a + j)
                plan.adv_arrays.append(Array(arr.astype(np.int32)))
            adv_pos.append(pos)
            a += len(arrays)
            continue
        if k == "array":
            plan.info[a] = ("adv", len(plan.adv_arrays))
            plan.adv_axes.append(a)
            plan.adv_arrays.append(_int_array(v, n, op))
            adv_pos.append(pos)
            if not plan.out or plan.out[-1] != ("batch",):
                plan.out.append(("batch",))
        a += 1
    if adv_pos:
        contiguous = adv_pos == list(range(adv_pos[0], adv_pos[0] + len(adv_pos)))
        plan.out = [d for d in plan.out if d != ("batch",)]
        if contiguous:
            before = builtins.sum(1 for d, (k, _) in zip(range(adv_pos[0]), expanded)
                                  if k in ("new", "slice"))
            plan.out.insert(before, ("batch",))
        else:
            plan.out.insert(0, ("batch",))
        shapes = [tuple(aval_of(arr).shape) for arr in plan.adv_arrays]
        try:
            plan.batch = tuple(np.broadcast_shapes(*shapes))
        except ValueError:
            raise IndexError(f"{op}: shape mismatch: indexing arrays could not be broadcast "
                             f"together with shapes {' '.join(map(str, shapes))}") from None
    return plan


def _static_slice(s, n, axis, x, op):
    try:
        start, stop, step = s.indices(n)
    except ConcretizationError:
        raise ConcretizationError(
            f"{op}: slice bounds must be static, got a traced bound in {s} on axis {axis} of "
            f"{short(x)}; use mx.lax.dynamic_slice (fixed size, traced start)") from None
    except TypeError:
        raise IndexError(f"{op}: slice bounds must be static ints, got {s} on axis {axis} of "
                         f"{short(x)}; use mx.lax.dynamic_slice for traced starts") from None
    return start, stop, step, len(range(start, stop, step))


def _mask_positions(mask, x, a, op):
    m = _concrete(mask)
    if m is None:
        raise ConcretizationError(
            f"{op}: boolean mask {short(mask)} is traced (inside jit or vmap), but the result "
            "shape depends on its values. Use mnp.where(mask, x, 0), mnp.nonzero(mask, "
            "size=...) or x.at[...] with integer indices instead.")
    m = np.asarray(m)
    want = tuple(x.shape[a:a + m.ndim])
    if m.shape != want:
        raise IndexError(f"{op}: boolean index of shape {list(m.shape)} does not match "
                         f"axes {a}..{a + m.ndim - 1} of {short(x)} (sizes {list(want)})")
    return np.nonzero(m) if m.ndim else ()


# --- x[idx] -----------------------------------------------------------------------------------
def _is_basic(idx):
    if isinstance(idx, tuple):
        return builtins.all(_is_basic_item(i) for i in idx)
    return _is_basic_item(idx)


def _is_basic_item(i):
    if isinstance(i, slice):
        return builtins.all(v is None or type(v) is int for v in (i.start, i.stop, i.step))
    return isinstance(i, _BASIC_TYPES) and not isinstance(i, (bool, np.bool_))


def getitem(x, idx, mode="clip", fill_value=None):
    """x[idx] with NumPy semantics (see the module docstring for out-of-bounds rules);
    mode="fill" (`x.at[idx].get(mode="fill")`) gives fill_value where an integer-array or
    traced index is out of bounds."""
    if mode == "clip" and type(x) is Array and not (_busy[0] and _state.active) and \
            type(x._buf) is np.ndarray and _is_basic(idx):
        try:                              # eager fast path: a NumPy view
            out = x._buf[idx]
            return Array(out if type(out) is np.ndarray else np.asarray(out), x._weak)
        except IndexError:
            pass                          # re-raised below with mirax's message
    x = operand(x, "getitem")
    plan = _parse(x, idx, traced_as_array=mode == "fill")
    y = _basic(plan)
    if plan.adv_arrays:
        y = ix.gather(y, _stack_indices(plan), plan.adv_axes, mode=mode, fill_value=fill_value)
    return _arrange(plan, y)


def _basic(plan):
    """Apply the slices, static ints and traced scalar ints (every axis keeps its place)."""
    x, starts, limits, strides, flip = plan.x, [], [], [], []
    for a, n in enumerate(x.shape):
        kind = plan.info.get(a, ("adv",))
        if kind[0] == "slice":
            start, _, step, m = kind[1:]
            if m == 0:
                s, e, st = 0, 0, 1
            elif step > 0:
                s, e, st = start, start + (m - 1) * step + 1, step
            else:
                last = start + (m - 1) * step
                s, e, st = last, start + 1, -step
                flip.append(a)
        elif kind[0] == "int":
            s, e, st = kind[1], kind[1] + 1, 1
        else:
            s, e, st = 0, n, 1
        starts.append(s)
        limits.append(e)
        strides.append(st)
    y = sh.slice(x, starts, limits, strides)
    if flip:
        y = sh.rev(y, flip)
    dyn = [a for a, k in plan.info.items() if k[0] == "dyn"]
    if dyn:
        zero = Array(np.zeros((), np.int32))
        st = [plan.info[a][1] if a in dyn else zero for a in range(y.ndim)]
        y = ix.dynamic_slice(y, st, [1 if a in dyn else n for a, n in enumerate(y.shape)],
                             allow_negative_indices=False)   # wrapped once in _parse
    return y


def _stack_indices(plan):
    arrays = [sh.broadcast_to(a, plan.batch) for a in plan.adv_arrays]
    return sh.concatenate([sh.reshape(a, plan.batch + (1,)) for a in arrays], len(plan.batch))


def _labels(plan, nd):
    """Dim labels of the gathered value: batch dims first, then the non-advanced axes."""
    return [("b", j) for j in range(len(plan.batch))] + \
        [("axis", a) for a in range(nd) if a not in plan.adv_axes]


def _target(plan):
    out = []
    for d in plan.out:
        if d == ("batch",):
            out += [("b", j) for j in range(len(plan.batch))]
        elif d[0] == "axis":
            out.append(d)
    return out


def _arrange(plan, z):
    labels = _labels(plan, plan.x.ndim)
    target = _target(plan)
    order = [labels.index(t) for t in target]
    order += [i for i in range(len(labels)) if i not in order]   # size-1 (int) axes last
    z = sh.transpose(z, order)
    shape = []
    for d in plan.out:
        if d == ("new",):
            shape.append(1)
        elif d == ("batch",):
            shape += list(plan.batch)
        else:
            shape.append(z.shape[target.index(d)])
    return sh.reshape(z, tuple(shape))


# --- x.at[idx] --------------------------------------------------------------------------------
_SCATTERS = {"set": ix.scatter, "add": ix.scatter_add, "mul": ix.scatter_mul,
             "min": ix.scatter_min, "max": ix.scatter_max}
_COMBINE = {"set": lambda r, v: v, "add": ew.add, "mul": ew.mul, "min": ew.min, "max": ew.max}


class _IndexUpdateHelper:
    """`x.at`: `x.at[idx]` gives an `_IndexUpdateRef` (JAX semantics, functional)."""
    __slots__ = ("x",)

    def __init__(self, x):
        self.x = x

    def __getitem__(self, idx):
        return _IndexUpdateRef(self.x, idx)

    def __repr__(self):
        return f"_IndexUpdateHelper({self.x!r})"


class _IndexUpdateRef:
    __slots__ = ("x", "idx")

    def __init__(self, x, idx):
        self.x, self.idx = x, idx

    def get(self, *, mode=None, fill_value=None, indices_are_sorted=False,
            unique_indices=False):
        modes = {None: "clip", "clip": "clip", "promise_in_bounds": "clip", "fill": "fill",
                 "drop": "fill"}
        if mode not in modes:
            raise ValueError(f"at[...].get: mode must be one of 'clip', 'fill', 'drop' or "
                             f"'promise_in_bounds', got {mode!r}")
        return getitem(self.x, self.idx, modes[mode], fill_value)

    def set(self, values, *, mode=None, **kw):
        return _update(self.x, self.idx, values, "set", mode)

    def add(self, values, *, mode=None, **kw):
        return _update(self.x, self.idx, values, "add", mode)

    def mul(self, values, *, mode=None, **kw):
        return _update(self.x, self.idx, values, "mul", mode)

    multiply = mul

    def min(self, values, *, mode=None, **kw):
        return _update(self.x, self.idx, values, "min", mode)

    def max(self, values, *, mode=None, **kw):
        return _update(self.x, self.idx, values, "max", mode)


def _out_shape(plan, y_shape):
    shape = []
    for d in plan.out:
        shape += [1] if d == ("new",) else list(plan.batch) if d == ("batch",) \
            else [y_shape[d[1]]]
    return tuple(shape)


def _update(x, idx, values, op, mode=None):
    """x with values combined at idx; out-of-bounds updates are dropped (mode="clip"
    clamps them instead), as in JAX."""
    name = f"at[...].{op}"
    x = operand(x, name)
    plan = _parse(x, idx, name)
    v = cast(values, x.dtype, op=name)
    simple = not plan.adv_arrays and builtins.all(
        k[0] == "int" or k[0] == "slice" and k[3] == 1 for k in plan.info.values())
    if simple:                            # a static window: read-modify-write with slices
        region = _basic(plan)
        v = _broadcast_values(v, _out_shape(plan, region.shape), name)
        v = sh.reshape(v, region.shape)
        starts = [plan.info[a][1] if a in plan.info else 0 for a in range(x.ndim)]
        new = _COMBINE[op](region, v)
        out = ix.dynamic_update_slice(plan.x, new, starts, allow_negative_indices=False)
    else:
        out = _scatter_update(plan, v, op, name, "clip" if mode == "clip" else "drop")
    return sh.reshape(out, plan.orig_shape) if out.shape != plan.orig_shape else out


def _broadcast_values(v, shape, name):
    try:
        return sh.broadcast_to(v, shape)
    except ValueError:
        raise ShapeError(f"{name}: values {short(v)} do not broadcast to the indexed shape "
                         f"{list(shape)}") from None


def _scatter_update(plan, v, op, name, mode):
    """General case: every non-full axis gets an index array on one grid; full slices stay
    whole (the scatter's rest axes)."""
    x = plan.x
    full = {a for a, k in plan.info.items() if k[0] == "slice" and k[1:4] == (0, x.shape[a], 1)}
    # grid dims, in output order: the advanced batch block and each partial slice
    grid, labels = [], []
    for d in plan.out:
        if d == ("batch",):
            grid += list(plan.batch)
            labels += [("b", j) for j in range(len(plan.batch))]
        elif d[0] == "axis" and d[1] not in full:
            grid.append(plan.info[d[1]][4])
            labels.append(d)
    grid = tuple(grid)
    axes, pieces = [], []
    for a in range(x.ndim):
        kind = plan.info[a]
        if a in full:
            continue
        if kind[0] == "slice":
            start, _, step, m = kind[1:]
            pos = labels.index(("axis", a))
            r = Array(np.arange(start, start + m * step, step, dtype=np.int32)[:m]
                      if m else np.zeros(0, np.int32))
            p = sh.broadcast_in_dim(r, grid, (pos,))
        elif kind[0] == "adv":
            b0 = labels.index(("b", 0)) if plan.batch else 0
            arr = sh.broadcast_to(plan.adv_arrays[kind[1]], plan.batch)
            p = sh.broadcast_in_dim(arr, grid, tuple(range(b0, b0 + len(plan.batch))))
        else:
            p = sh.broadcast_to(operand(kind[1]) if kind[0] == "int" else kind[1], grid)
        axes.append(a)
        pieces.append(sh.reshape(ew.convert_element_type(p, np.int32), grid + (1,)))
    idx = sh.concatenate(pieces, len(grid)) if pieces else \
        Array(np.zeros(grid + (0,), np.int32))
    # values: indexed shape -> (grid dims in output order, then the full axes in x order)
    y_shape = tuple(plan.info[a][4] if plan.info[a][0] == "slice" else 1
                    for a in range(x.ndim))
    v = _broadcast_values(v, _out_shape(plan, y_shape), name)
    out_labels = []
    for d in plan.out:
        out_labels += [d] if d != ("batch",) else [("b", j) for j in range(len(plan.batch))]
    keep = [i for i, d in enumerate(out_labels) if d != ("new",)]
    v = sh.reshape(v, tuple(v.shape[i] for i in keep))
    out_labels = [out_labels[i] for i in keep]
    rest = [("axis", a) for a in range(x.ndim) if a in full]
    v = sh.transpose(v, [out_labels.index(d) for d in labels + rest])
    return _SCATTERS[op](x, idx, v, tuple(axes), mode=mode)


# --- take / take_along_axis / put_along_axis ----------------------------------------------
def _positions(indices, n, mode, op):
    i = operand(indices, op)
    if not dtypes.is_int(i.dtype):
        raise TypeError(f"{op}: indices must be integers, got {short(i)}")
    i = ew.convert_element_type(i, np.int32) if i.dtype != np.int32 or i.weak_type else i
    if mode == "wrap":
        r = ew.rem(i, n) if n else i
        return ew.select(ew.lt(r, 0), ew.add(r, n), r), "clip"
    if mode not in ("fill", "clip"):
        raise ValueError(f"{op}: mode must be 'fill', 'clip' or 'wrap', got {mode!r}")
    in_range = ew.logical_and(ew.ge(i, -n), ew.lt(i, 0))
    return ew.select(in_range, ew.add(i, n), i), mode


def take(a, indices, axis=None, mode=None, fill_value=None, unique_indices=False,
         indices_are_sorted=False):
    """np.take; as in JAX the default mode is "fill": out-of-bounds positions (outside
    [-n, n)) give fill_value (NaN for floats). "clip" clamps, "wrap" wraps."""
    a = operand(a, "take")
    if axis is None:
        a, axis = sh.reshape(a, (a.size,)), 0
    axis = normalize_axis(axis, a.ndim, "take", a)
    i, mode = _positions(indices, a.shape[axis], mode or "fill", "take")
    out = ix.gather(a, sh.reshape(i, i.shape + (1,)), (axis,), mode=mode, fill_value=fill_value)
    nb = i.ndim                           # batch dims go where `axis` was
    perm = list(range(nb, nb + axis)) + list(range(nb)) + list(range(nb + axis, out.ndim))
    return sh.transpose(out, perm)


def _along_axis_grid(arr, indices, axis, mode, op):
    arr, idx = operand(arr, op), operand(indices, op)
    if axis is None:
        arr, axis = sh.reshape(arr, (arr.size,)), 0
        idx = sh.reshape(idx, (idx.size,))
    if idx.ndim != arr.ndim:
        raise ValueError(f"{op}: indices {short(idx)} and array {short(arr)} must have the "
                         "same number of dimensions")
    axis = normalize_axis(axis, arr.ndim, op, arr)
    shape = []
    for d, (n, m) in enumerate(zip(arr.shape, idx.shape)):
        if d == axis:
            shape.append(m)
        elif n == m or 1 in (n, m):
            shape.append(builtins.max(n, m) if builtins.min(n, m) else 0)
        else:
            raise ShapeError(f"{op}: indices {short(idx)} do not broadcast with {short(arr)} "
                             f"outside axis {axis}")
    shape = tuple(shape)
    i, mode = _positions(idx, arr.shape[axis], mode, op)
    pieces = []
    for d in range(arr.ndim):
        if d == axis:
            p = sh.broadcast_to(i, shape)
        elif arr.shape[d] == 1:
            p = sh.full(shape, 0, np.int32)
        else:
            p = sh.iota(np.int32, shape, d)
        pieces.append(sh.reshape(p, shape + (1,)))
    return arr, sh.concatenate(pieces, len(shape)), shape, mode


def take_along_axis(arr, indices, axis, mode=None, fill_value=None):
    """np.take_along_axis (other axes broadcast, as in JAX); default mode "fill"."""
    arr, idx, _, mode = _along_axis_grid(arr, indices, axis, mode or "fill", "take_along_axis")
    return ix.gather(arr, idx, tuple(range(arr.ndim)), mode=mode, fill_value=fill_value)


def put_along_axis(arr, indices, values, axis, inplace=False, mode=None):
    """np.put_along_axis, functional (inplace must be False); out-of-bounds are dropped."""
    if inplace:
        raise ValueError("put_along_axis: mirax arrays are immutable; pass inplace=False")
    a, idx, shape, mode = _along_axis_grid(arr, indices, axis, mode or "fill",
                                           "put_along_axis")
    out = ix.scatter(a, idx, sh.broadcast_to(operand(values), shape), tuple(range(a.ndim)),
                     mode="drop" if mode == "fill" else "clip")
    return sh.reshape(out, operand(arr).shape)


# --- nonzero / argwhere / flatnonzero / compress --------------------------------------------
def _prefix_count(m):
    """Inclusive prefix sums of an int32 vector (Hillis-Steele: log2(n) shifted adds)."""
    n, s = m.shape[0], 1
    while s < n:
        m = ew.add(m, sh.pad(m, 0, ((s, -s, 0),)))
        s *= 2
    return m


def nonzero(a, *, size=None, fill_value=None):
    """np.nonzero. Without `size` the input must be concrete (the result shape depends on
    its values); with `size` it works under jit/vmap, padding with fill_value (default 0)."""
    a = operand(a, "nonzero")
    if a.ndim == 0:
        raise ValueError("nonzero: not allowed on 0-d arrays; use atleast_1d(a) first")
    if size is None:
        v = _concrete(a)
        if v is None:
            raise ConcretizationError(
                f"nonzero: {short(a)} is traced (inside jit or vmap) and the number of "
                "nonzeros depends on its values; pass size=... (and fill_value=...)")
        return tuple(Array(i.astype(np.int32)) for i in np.nonzero(np.asarray(v)))
    size = int(size)
    flat = sh.reshape(ew.ne(a, ew.zeros_like(a)), (a.size,))
    m = ew.convert_element_type(flat, np.int32)
    slot = ew.sub(_prefix_count(m), 1)
    slot = ew.select(flat, slot, sh.full(slot.shape, size, np.int32))   # zeros -> dropped
    where = ix.scatter(sh.full((size,), -1, np.int32), sh.reshape(slot, (a.size, 1)),
                       sh.iota(np.int32, (a.size,)), (0,), mode="drop")
    valid = ew.ge(where, 0)
    fills = fill_value if isinstance(fill_value, (tuple, list)) else [fill_value] * a.ndim
    out, stride = [], 1
    strides = []
    for n in reversed(a.shape):
        strides.insert(0, stride)
        stride *= n
    for d, n in enumerate(a.shape):
        c = ew.rem(ew.div(where, strides[d]) if strides[d] > 1 else where, n)
        f = sh.full((size,), 0 if fills[d] is None else fills[d], np.int32)
        out.append(ew.select(valid, c, f))
    return tuple(out)


def flatnonzero(a, *, size=None, fill_value=None):
    return nonzero(sh.reshape(operand(a, "flatnonzero"), (-1,)), size=size,
                   fill_value=fill_value)[0]


def argwhere(a, *, size=None, fill_value=None):
    a = operand(a, "argwhere")
    if a.ndim == 0:
        n = 1 if _concrete_bool(a) else 0
        return Array(np.zeros((n if size is None else size, 0), np.int32))
    parts = nonzero(a, size=size, fill_value=fill_value)
    return sh.stack(parts, 1)


def _concrete_bool(a):
    v = _concrete(a)
    if v is None:
        raise ConcretizationError(f"argwhere: {short(a)} is traced; pass size=...")
    return bool(np.asarray(v))


def compress(condition, a, axis=None, *, size=None, fill_value=0):
    """np.compress: the slices of `a` along `axis` where `condition` is true (concrete
    condition, or `size` given)."""
    a = operand(a, "compress")
    if axis is None:
        a, axis = sh.reshape(a, (a.size,)), 0
    cond = sh.reshape(operand(condition, "compress"), (-1,))
    n = a.shape[normalize_axis(axis, a.ndim, "compress", a)]
    if cond.shape[0] > n:
        raise ValueError(f"compress: condition of length {cond.shape[0]} is longer than "
                         f"axis {axis} of {short(a)}")
    (i,) = nonzero(cond, size=size, fill_value=-(2 ** 30) if size is not None else None)
    out = take(a, i, axis, mode="fill", fill_value=fill_value)
    return out


# --- diagonal / diag / trace / triu / tril -------------------------------------------------
def diagonal(a, offset=0, axis1=0, axis2=1):
    """np.diagonal: the diagonal moves to the last axis. Linear (reshape + strided slice)."""
    a = operand(a, "diagonal")
    if a.ndim < 2:
        raise ValueError(f"diagonal: needs at least 2 dimensions, got {short(a)}")
    i1 = normalize_axis(axis1, a.ndim, "diagonal", a)
    i2 = normalize_axis(axis2, a.ndim, "diagonal", a)
    if i1 == i2:
        raise ValueError(f"diagonal: axis1 and axis2 are both {i1} for {short(a)}")
    rest = [d for d in range(a.ndim) if d not in (i1, i2)]
    a = sh.transpose(a, rest + [i1, i2])
    lead, (n, m) = a.shape[:-2], a.shape[-2:]
    k = int(offset)
    length = builtins.max(0, builtins.min(n, m - k) if k >= 0 else builtins.min(n + k, m))
    flat = sh.reshape(a, lead + (n * m,))
    if length == 0:
        return sh.slice_in_dim(flat, 0, 0, axis=len(lead))
    start = k if k >= 0 else -k * m
    return sh.slice_in_dim(flat, start, start + (length - 1) * (m + 1) + 1, m + 1,
                           axis=len(lead))


def diag(v, k=0):
    """np.diag: 1-D -> a matrix with v on diagonal k (pad with interior); 2-D -> diagonal."""
    v = operand(v, "diag")
    k = int(k)
    if v.ndim == 2:
        return diagonal(v, k)
    if v.ndim != 1:
        raise ValueError(f"diag: input must be 1-D or 2-D, got {short(v)}")
    L = v.shape[0]
    n = L + builtins.abs(k)
    if L == 0:
        return sh.full((n, n), 0, v.dtype)
    lo = k if k >= 0 else -k * n
    hi = n * n - (lo + (L - 1) * (n + 1) + 1)
    return sh.reshape(sh.pad(v, 0, ((lo, hi, n),)), (n, n))


def trace(a, offset=0, axis1=0, axis2=1, dtype=None):
    return _sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


def _tri_mask(shape, k, lower):
    rows = sh.iota(np.int32, shape, 0)
    cols = sh.iota(np.int32, shape, 1)
    d = ew.sub(cols, rows)
    return ew.le(d, k) if lower else ew.ge(d, k)


def _tri(m, k, lower, op):
    m = operand(m, op)
    if m.ndim < 2:
        if m.ndim == 1:                   # NumPy broadcasts a 1-D input to a square matrix
            m = sh.broadcast_to(m, (m.shape[0], m.shape[0]))
        else:
            raise ValueError(f"{op}: input must have at least 1 dimension, got {short(m)}")
    mask = _tri_mask(m.shape[-2:], int(k), lower)
    return ew.select(sh.broadcast_to(mask, m.shape), m, ew.zeros_like(m))


def tril(m, k=0):
    return _tri(m, k, True, "tril")


def triu(m, k=0):
    return _tri(m, k, False, "triu")
