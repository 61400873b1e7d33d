"""einsum: subscripts parsed into diagonals, sums, dot_generals and a final transpose.

The plan: (1) give '...' dimensions fresh labels (right-aligned, broadcasting like NumPy);
(2) per operand, take diagonals for repeated labels and sum out labels used nowhere else;
(3) contract the operands left to right with dot_general, batching labels that are still
needed later and contracting the rest; (4) sum what remains and transpose to the output.
Every step is a mirax op, so einsum differentiates and batches through their rules.
"""
from __future__ import annotations

import string

import numpy as np

from mirax.core import dtypes
from mirax.core.errors import ShapeError
from mirax.ops import elementwise as ew
from mirax.ops import reduction as red
from mirax.ops import shape as sh
from mirax.ops.common import operand, promote, short
from mirax.ops.dot import canonical_precision, dot_general

__all__ = ["einsum", "einsum_path"]

_LETTERS = set(string.ascii_letters)


def _parse(subscripts: str, xs):
    s = subscripts.replace(" ", "")
    if "->" in s:
        lhs, out = s.split("->")
        explicit = True
    else:
        lhs, out, explicit = s, "", False
    ins = lhs.split(",")
    if len(ins) != len(xs):
        raise ValueError(f"einsum: {len(ins)} operand subscripts in {subscripts!r} but "
                         f"{len(xs)} operands")
    used = set(s) & _LETTERS
    pool = [c for c in map(chr, range(0x100, 0x200)) if c not in used]
    n_ell = 0
    for spec, x in zip(ins, xs):
        _check_spec(spec, subscripts)
        if "..." in spec:
            n_ell = max(n_ell, x.ndim - (len(spec) - 3))
    ell = pool[:n_ell]
    labels = []
    for spec, x in zip(ins, xs):
        if "..." in spec:
            k = x.ndim - (len(spec) - 3)
            if k < 0:
                raise ValueError(f"einsum: subscripts {spec!r} have too many labels for "
                                 f"operand {short(x)}")
            a, b = spec.split("...")
            lab = list(a) + ell[n_ell - k:] + list(b)
        else:
            lab = list(spec)
        if len(lab) != x.ndim:
            raise ShapeError(f"einsum: subscripts {spec!r} do not match operand {short(x)} "
                             f"of rank {x.ndim}")
        labels.append(lab)
    if explicit:
        _check_spec(out, subscripts)
        if "..." in out:
            a, b = out.split("...")
            out_labels = list(a) + ell + list(b)
        else:
            out_labels = list(out)
            if ell:
                raise ValueError(f"einsum: {subscripts!r} uses '...' in the inputs but not "
                                 "in the output")
        all_in = {c for lab in labels for c in lab}
        for c in out_labels:
            if c not in all_in:
                raise ValueError(f"einsum: output label {c!r} does not appear in the inputs")
            if out_labels.count(c) > 1:
                raise ValueError(f"einsum: output label {c!r} is repeated")
    else:
        counts = {}
        for lab in labels:
            for c in lab:
                counts[c] = counts.get(c, 0) + 1
        out_labels = ell + sorted(c for c, k in counts.items() if k == 1 and c in _LETTERS)
    return labels, out_labels


def _check_spec(spec, subscripts):
    rest = spec.replace("...", "", 1)
    if "." in rest or any(c not in _LETTERS for c in rest):
        raise ValueError(f"einsum: invalid subscripts {subscripts!r}")


def _diagonal(x, lab):
    """Collapse repeated labels of one operand by taking diagonals."""
    while True:
        dup = next((c for c in lab if lab.count(c) > 1), None)
        if dup is None:
            return x, lab
        p = lab.index(dup)
        q = lab.index(dup, p + 1)
        n = x.shape[p]
        if x.shape[q] != n:
            raise ShapeError(f"einsum: label {dup!r} has sizes {n} and {x.shape[q]} in "
                             f"operand {short(x)}")
        rest = [i for i in range(x.ndim) if i not in (p, q)]
        x = sh.transpose(x, rest + [p, q])
        x = sh.reshape(x, tuple(x.shape[:-2]) + (n * n,))
        x = sh.slice_in_dim(x, 0, n * n, n + 1, axis=x.ndim - 1)
        lab = [lab[i] for i in rest] + [dup]


def _sum_labels(x, lab, keep):
    axes = tuple(i for i, c in enumerate(lab) if c not in keep)
    if not axes:
        return x, lab
    return red.reduce_sum(x, axes), [c for c in lab if c in keep]


def _sizes(xs, labels):
    size = {}
    for x, lab in zip(xs, labels):
        for c, d in zip(lab, x.shape):
            if size.get(c, 1) == 1:
                size[c] = d
            elif d not in (1, size[c]):
                raise ShapeError(f"einsum: label {c!r} has inconsistent sizes {size[c]} and "
                                 f"{d} (operands {', '.join(short(y) for y in xs)})")
    return size


def _expand(x, lab, size):
    """Broadcast size-1 dimensions to the label's full size."""
    target = tuple(size[c] for c in lab)
    return x if tuple(x.shape) == target else sh.broadcast_in_dim(x, target,
                                                                  tuple(range(x.ndim)))


def einsum(subscripts, *operands, optimize="greedy", precision=None,
           preferred_element_type=None, _use_xeinsum=False):
    if not isinstance(subscripts, str):
        subscripts, operands = _from_sublists((subscripts,) + tuple(operands))
    prec = canonical_precision(precision, "einsum")
    xs = [operand(x, "einsum") for x in operands]
    if not xs:
        raise ValueError("einsum: at least one operand is required")
    xs = list(promote("einsum", *xs)) if len(xs) > 1 else xs
    labels, out = _parse(subscripts, xs)
    size = _sizes(xs, labels)
    xs = [_expand(x, lab, size) for x, lab in zip(xs, labels)]
    ops = []
    for i, (x, lab) in enumerate(zip(xs, labels)):
        x, lab = _diagonal(x, list(lab))
        elsewhere = set(out).union(*(set(lb) for j, lb in enumerate(labels) if j != i))
        ops.append(_sum_labels(x, lab, elsewhere))
    x, lab = ops[0]
    for k in range(1, len(ops)):
        y, ylab = ops[k]
        later = set(out).union(*(set(lb) for _, lb in ops[k + 1:]))
        shared = [c for c in lab if c in ylab]
        batch = [c for c in shared if c in later]
        contract = [c for c in shared if c not in later]
        dn = ((tuple(lab.index(c) for c in contract), tuple(ylab.index(c) for c in contract)),
              (tuple(lab.index(c) for c in batch), tuple(ylab.index(c) for c in batch)))
        x = dot_general(x, y, dn, precision=prec, op="einsum")
        lab = batch + [c for c in lab if c not in shared] + [c for c in ylab if c not in shared]
    x, lab = _sum_labels(x, lab, set(out))
    x = sh.transpose(x, tuple(lab.index(c) for c in out))
    if preferred_element_type is not None:
        x = ew.convert_element_type(x, dtypes.canonicalize(preferred_element_type))
    return x


def _from_sublists(args):
    """einsum(a, [0, 1], b, [1, 2], [0, 2]) (NumPy's sublist form) as "ab,bc->ac" and the
    operands; Ellipsis in a sublist stands for '...'."""
    def letters(sub):
        out = []
        for v in sub:
            if v is Ellipsis:
                out.append("...")
            elif isinstance(v, (int, np.integer)) and 0 <= v < 52:
                out.append(string.ascii_letters[int(v)])
            else:
                raise ValueError(f"einsum: sublist labels must be ints in [0, 52) or "
                                 f"Ellipsis, got {v!r}")
        return "".join(out)

    ops, subs = list(args[0::2]), list(args[1::2])
    out = None
    if len(ops) > len(subs):     # an odd count: the last entry is the output sublist
        out = ops.pop()
    if not ops:
        raise ValueError("einsum: at least one operand is required")
    spec = ",".join(letters(sb) for sb in subs)
    return (spec if out is None else f"{spec}->{letters(out)}"), ops


def einsum_path(subscripts, *operands, optimize="greedy"):
    """The contraction order einsum uses: left to right."""
    if not isinstance(subscripts, str):
        raise TypeError(f"einsum_path: subscripts must be a string, got "
                        f"{type(subscripts).__name__}")
    for x in operands:
        operand(x, "einsum_path")
    n = len(operands)
    return [("einsum_path",) + tuple((0, 1) for _ in range(n - 1))], "left-to-right"
