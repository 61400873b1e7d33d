"""Small fusion groups on the CPU as one call of a compiled interpreter.

A group on few elements (below loops.MIN_SIZE) costs one NumPy call per op when it runs
unfused: about half a microsecond each, whatever the size, so a jitted chain of 200 ops
on 16 values took 140 us where the arithmetic takes one. Compiling each such group into
its own loop (loops.py) would cost numba seconds per group (a 200-op chain: 3-10 s).
Here one kernel, compiled once per float dtype (and cached on disk with loops.py's
kernels), interprets a tape: each row of `code` is (op, dst, a, b, c), slots of `regs`
[slots, n], and every op runs as a loop over the group's n elements. The group's outside
inputs are copied into their slots (a single value fills its slot), its outputs copied
out; slots are reused once their values are dead.

Values: the float ops are IEEE operations on the group's dtype, as NumPy's (bit for bit);
float32 exp, tanh, logistic, sin and cos are vecmath.py's (within 0.5-2.5 ulp, as the
compiled loops'; sin and cos beyond vecmath.SIN_LIMIT libm's). Booleans (comparisons,
masks) live in the slots as 0 and 1 of the group's dtype. Groups with other dtypes,
reductions, broadcasts other than of single values, or other ops run unfused as before.

Measured (one thread of a 2-core machine, `python benchmarks/suite.py --only W8`: the
jitted chain of 200 ops on f32[16] of benchmarks/overhead.py, add, multiply by 0.5, sin,
tanh, subtract): 30-40 us a call (the interpreter's share about 15) against 140 us
unfused, JAX jit 32-36 us.
"""
from __future__ import annotations

import math
import re
import sys

import numpy as np

from mirax.backends.cpu import loops
from mirax.compiler.pipeline import debug_level

_FLOATS, _BOOL = loops._FLOATS, loops._BOOL
# A call costs about three unfused ops, plus one per input copied in and per output
# copied out (an unfused NumPy op on a few elements: 0.5-0.7 us; the interpreter's call
# 0.9 us, its slots 0.7 us, a copy in 0.8 us, out 0.6 us): shorter groups stay unfused.
EXTRA_OPS = 3

# op name -> scalar expression of a, b, c (slot values); booleans are 0/1 floats
_OPS = {**{name: expr.format("a", "b") for name, expr in loops._FLOAT_OPS.items()},
        **{f"{name}32": expr.format("a") for name, expr in loops._F32_OPS.items()},
        **{name: f"(1.0 if a {op} b else 0.0)" for name, op in loops._COMPARE.items()},
        "and": "(1.0 if (a != 0 and b != 0) else 0.0)",
        "or": "(1.0 if (a != 0 or b != 0) else 0.0)",
        "not": "(1.0 if a == 0 else 0.0)",
        "select": "(b if a != 0 else c)",
        "is_finite": "(1.0 if _np.isfinite(a) else 0.0)",
        "copy": "a", "to_bool": "(1.0 if a != 0 else 0.0)"}
_NAMES = sorted(_OPS)
_CODE = {name: k for k, name in enumerate(_NAMES)}


def _op(node, dtype) -> str | None:
    """The tape op of a group member whose values are `dtype` or bool, or None."""
    name = node.prim.name
    ins = [np.dtype(v.aval.dtype) for v in node.inputs]
    out = np.dtype(node.outputs[0].aval.dtype)
    if any(d not in (dtype, _BOOL) for d in ins + [out]):
        return None
    floats = all(d == dtype for d in ins)
    if name in loops._FLOAT_OPS and not node.params and floats:
        return name
    if name in loops._F32_OPS and not node.params and floats and dtype == np.float32:
        return f"{name}32"
    if name in loops._COMPARE and floats:
        return name
    if name in ("and", "or", "not") and all(d == _BOOL for d in ins):
        return name
    if name == "select" and ins[0] == _BOOL and ins[1] == ins[2] == out:
        return name
    if name == "is_finite" and floats:
        return name
    if name == "convert_element_type":
        return "to_bool" if out == _BOOL and ins[0] != _BOOL else "copy"
    return None


def _dtype(members):
    """The group's one float dtype, or None."""
    fl = {np.dtype(v.aval.dtype) for n in members for v in [*n.inputs, *n.outputs]} - {_BOOL}
    return fl.pop() if len(fl) == 1 and next(iter(fl)) in _FLOATS else None


def eligible(members) -> bool:
    """Whether the group runs on the tape: few elements, enough ops, one float dtype,
    every op taken, every value of the group's shape or a single outside value."""
    if not loops.available():
        return False
    shape = tuple(members[0].outputs[0].aval.shape)
    size = math.prod(shape)
    if size >= loops.MIN_SIZE or size == 0:
        return False
    dtype = _dtype(members)
    if dtype is None:
        return False
    made = {o for n in members for o in n.outputs}
    read = {v for n in members for v in n.inputs}
    outside = read - made
    if len(members) < EXTRA_OPS + len(outside) + len(made - read):   # (outputs: at least)
        return False
    for n in members:
        if len(n.outputs) != 1 or tuple(n.outputs[0].aval.shape) != shape or \
                _op(n, dtype) is None:
            return False
    return all(tuple(v.aval.shape) == shape or math.prod(v.aval.shape) == 1 for v in outside)


def _source(dtype) -> str:
    """The interpreter: per op, one loop over the elements reading only its operands.
    sin and cos take libm's versions for a whole op whose argument passes vecmath's
    range (a branch per element would keep the loop from vectorizing)."""
    names = [n for n in _NAMES if dtype == np.float32 or not n.endswith("32")]
    lines = ["def kernel(code, regs):", "    n = regs.shape[1]",
             "    for p in range(code.shape[0]):",
             "        op = code[p, 0]",
             "        d, ra, rb, rc = regs[code[p, 1]], regs[code[p, 2]], regs[code[p, 3]], "
             "regs[code[p, 4]]"]
    for k, name in enumerate(names):
        lines.append(f"        {'if' if k == 0 else 'elif'} op == {_CODE[name]}:")
        if name in ("sin32", "cos32"):
            lines += ["            far = False", "            for i in range(n):",
                      "                far |= abs(ra[i]) > _SIN_LIMIT", "            if far:",
                      "                for i in range(n):",
                      f"                    d[i] = _{name[:3]}_exact(ra[i])",
                      "                continue"]
        lines += ["            for i in range(n):",
                  f"                d[i] = {_operands(_OPS[name])}"]
    return "\n".join(lines + ["    return 0"]) + "\n"


def _operands(expr: str) -> str:
    """An op's expression of a, b, c with the slot reads in their place."""
    return re.sub(r"\b([abc])\b", lambda m: f"r{m.group(1)}[i]", expr)


def compile_fusion(node):
    """The kernel of one eligible fusion node: a function of its inputs."""
    sub = node.params["graph"]
    members, ins, outs = sub.nodes, list(sub.inputs), list(sub.outputs)
    dtype = _dtype(members)
    shape = tuple(members[0].outputs[0].aval.shape)
    size = math.prod(shape)
    last = {}   # value -> index of the last member reading it
    for j, m in enumerate(members):
        for v in m.inputs:
            last[v] = j
    slot, free, n_slots = {}, [], 0

    def take():
        nonlocal n_slots
        if free:
            return free.pop()
        n_slots += 1
        return n_slots - 1
    for v in ins:
        slot[v] = take()
    keep = set(outs)
    code = []
    for j, m in enumerate(members):
        args = [slot[v] for v in m.inputs]
        for v in set(m.inputs):   # dead after this op: its slot may take the result
            if last[v] == j and v not in keep:
                free.append(slot[v])
        o = m.outputs[0]
        slot[o] = take()
        code.append([_CODE[_op(m, dtype)], slot[o]] + (args + [0, 0, 0])[:3])
    code = np.array(code, np.int32)
    if debug_level() >= 3:
        print(f"# --- CPU tape {node.params['name']}: {len(code)} ops, {n_slots} slots",
              file=sys.stderr)
    kernel = loops.compiled(_source(dtype))
    in_slots = [slot[v] for v in ins]
    out_specs = [(slot[o], np.dtype(o.aval.dtype)) for o in outs]

    def run(*bufs):
        regs = np.empty((n_slots,) + shape, dtype)
        for k, b in zip(in_slots, bufs):
            regs[k] = b   # (a single value fills the slot)
        kernel(code, regs.reshape(n_slots, size))
        return [regs[k] != 0 if d == _BOOL else regs[k].copy() for k, d in out_specs]
    return run
