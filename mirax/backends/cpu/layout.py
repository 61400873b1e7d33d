"""The shape of a fusion group on the CPU: how its arrays are viewed as (L, R) rows, for
the compiled loops (loops.py) and the cache-blocked NumPy chunks (blocked.py) alike.

The group's elementwise values share one shape S. In flat mode (every outside input has
shape S or a single element; reductions reduce everything) arrays are viewed 1-d;
otherwise as (L, R), L the product of S[:k] and R of S[k:], and an outside input with
S's leading dimensions is sliced by rows while any other (a bias row, a scalar)
broadcasts whole, exactly as in the unfused op.
"""
from __future__ import annotations

import math

import numpy as np

MAX_ROW = 1 << 16   # row mode: longer rows would make blocked.py's chunks too big

REDUCE = {"reduce_sum": np.add, "reduce_max": np.maximum, "reduce_min": np.minimum,
          "reduce_prod": np.multiply}


def group_shape(members) -> tuple:
    return tuple(members[0].outputs[0].aval.shape)


def externals(members) -> list:
    made = {o for n in members for o in n.outputs}
    ins: dict = {}
    for n in members:
        for v in n.inputs:
            if v not in made:
                ins[v] = None
    return list(ins)


class Layout:
    """How a group's arrays are viewed. Values of shape S are viewed as (L, R), L the
    product of S[:k], R of S[k:]; k == ndim is the flat case (one row, (1, size)). Each
    outside input is `full` (sliced), `lead` (broadcast over the leading axes: passed
    whole, shape (R,)), `trail` (broadcast over the trailing axes: sliced, shape (L, 1))
    or `one` (a single value); a reduction reduces `all` axes, the `lead` ones
    (accumulated) or the `trail` ones (rows written)."""

    def __init__(self, shape, k, ins: dict, reds: dict):
        self.shape, self.k = shape, k
        self.L, self.R = math.prod(shape[:k]), math.prod(shape[k:])
        self.flat = k == len(shape)
        self.ins, self.reds = ins, reds


def _axes_kind(axes, nd, k):
    axes = tuple(sorted(axes))
    if axes == tuple(range(nd)):
        return "all"
    if axes == tuple(range(k)):
        return "lead"
    if axes == tuple(range(k, nd)):
        return "trail"
    return None


def _in_kind(a, shape, k):
    if a.size == 1:
        return "one"
    nd = len(shape)
    if len(a.shape) > nd:
        return None
    al = (1,) * (nd - len(a.shape)) + tuple(a.shape)
    lead, trail = al[:k], al[k:]
    lead_full, trail_full = lead == shape[:k], trail == shape[k:]
    lead_one, trail_one = all(d == 1 for d in lead), all(d == 1 for d in trail)
    if lead_full and trail_full:
        return "full"
    if lead_one and trail_full:
        return "lead"
    if lead_full and trail_one:
        return "trail"
    return None


def layout(members, ins) -> Layout | None:
    """The flat layout when it fits, else the (L, R) split with the shortest rows that
    every input and reduction fits; None when none does."""
    shape = group_shape(members)
    nd = len(shape)
    reds = [n for n in members if n.prim.name in REDUCE]
    for k in range(nd, 0, -1):
        kinds = {v: _in_kind(v.aval, shape, k) for v in ins}
        rk = {n.outputs[0]: _axes_kind(n.params["axes"], nd, k) for n in reds}
        if k == nd and any(x not in ("full", "one") for x in kinds.values()):
            continue
        if None in kinds.values() or None in rk.values():
            continue
        if k == nd and any(x != "all" for x in rk.values()):
            continue
        lay = Layout(shape, k, kinds, rk)
        if lay.R <= MAX_ROW and (lay.flat or lay.L > 1):
            return lay
    return None
