"""CUDA C generation: fusion nodes become one NVRTC-compiled kernel (row kernels: row_kernels.py).

Where it sits: runtime.py lowers a planned Graph; each `fusion` node (compiler/fusion.py)
comes here. A chain of elementwise ops becomes one kernel (values held in registers, one
read of each input and one write of each output): a raw kernel over flat indices where the
inputs are contiguous and of the full shape or a block of it (`_flat_kernel`: four
neighbouring values a thread, the full-shape operands moved as one 16-byte vector each:
the tanh-gelu of 512 MB runs at 98% of a copy's bandwidth on an H200, against 92% with
one value a thread), else a `cupy.ElementwiseKernel` (any layout, broadcast by CuPy);
a chain ending in a reduction becomes one `cupy.ReductionKernel` whose map step is the
chain, except where a generated kernel does it better (`reduction_layout`;
MIRAX_CUDA_TWO_STAGE=0 turns them off, to measure): a reduction to few outputs (a loss:
one value) of many values, long rows (a layer norm's backward), and columns (bias and norm
weight gradients: sums over the leading axes), each storing the chain's other values of
the full shape too where the plan needs them (`_generated`). 0-d constants are inlined as
literals. Kernels are cached in memory by source, and CuPy caches the compiled binaries on
disk by source hash. MIRAX_DEBUG=3 prints each source.

float16 and bfloat16 are storage types only: kernels see their bits (`unsigned short`;
CuPy kernels get uint16 views), compute in float32 and round each op's result to the
storage type (round to nearest even), as NumPy's float16 loops and ml_dtypes' bfloat16
ufuncs do op by op; reductions accumulate in float32 and round once. NOTE: CuPy compiles
every kernel with -ftz=true, so float32 subnormals, and with them bfloat16's, flush to zero.

`Unsupported` means "no kernel for this": the runtime then runs the group op by op.
The row kernels (softmax, layer_norm, ...) are row_kernels.py's, on the helpers here.
"""
from __future__ import annotations

import functools
import math
import re
import sys

import cupy as cp
import numpy as np

from mirax.core import config
from mirax.core import dtypes
from mirax.compiler.pipeline import debug_level
from mirax.ops import elementwise as ew


class Unsupported(Exception):
    pass


_CTYPE = {  # the type values are computed in
    np.dtype(np.float16): "float", dtypes.bfloat16: "float",
    np.dtype(np.float32): "float", np.dtype(np.float64): "double",
    np.dtype(np.bool_): "bool", np.dtype(np.int8): "signed char", np.dtype(np.int16): "short",
    np.dtype(np.int32): "int", np.dtype(np.int64): "long long",
    np.dtype(np.uint8): "unsigned char", np.dtype(np.uint16): "unsigned short",
    np.dtype(np.uint32): "unsigned int", np.dtype(np.uint64): "unsigned long long",
}
_PARAM = {d: np.dtype(d).name for d in _CTYPE}  # CuPy kernels' parameter types
LOW = {np.dtype(np.float16): "h", dtypes.bfloat16: "bf"}  # 16-bit floats: storage bits only
_PARAM.update({d: "uint16" for d in LOW})

# bits <-> float for the 16-bit floats; mirax_r* rounds a float to the storage type and back.
# float -> 16 bits: one cvt.rn instruction (round to nearest even, as NumPy and ml_dtypes;
# a NaN comes out as the canonical quiet NaN, where ml_dtypes keeps a payload).
HALF_PRELUDE = r"""
__device__ __forceinline__ float mirax_h2f(unsigned short h) {
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
}
__device__ __forceinline__ unsigned short mirax_f2h(float f) {
  unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
}
__device__ __forceinline__ float mirax_bf2f(unsigned short h) {
  return __uint_as_float(((unsigned int)h) << 16);
}
__device__ __forceinline__ unsigned short mirax_f2bf(float f) {
  unsigned short h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
}
__device__ __forceinline__ float mirax_rh(float f) { return mirax_h2f(mirax_f2h(f)); }
__device__ __forceinline__ float mirax_rbf(float f) { return mirax_bf2f(mirax_f2bf(f)); }
"""


def storage(dtype) -> str:
    """The C type of a buffer element (16-bit floats: their bits)."""
    return "unsigned short" if np.dtype(dtype) in LOW else ctype(dtype)


def load(dtype, expr: str) -> str:
    """A stored element `expr` as the value computed with."""
    d = np.dtype(dtype)
    return f"mirax_{LOW[d]}2f({expr})" if d in LOW else f"(({ctype(d)}){expr})"


def store(dtype, expr: str) -> str:
    """A computed value `expr` as the element stored (rounded to nearest even)."""
    d = np.dtype(dtype)
    return f"mirax_f2{LOW[d]}({expr})" if d in LOW else expr


def rounded(dtype, expr: str) -> str:
    """`expr` rounded to `dtype` where that is a 16-bit float (each op's result is)."""
    d = np.dtype(dtype)
    return f"mirax_r{LOW[d]}({expr})" if d in LOW else expr


_HELPERS = re.compile(r"\bmirax_(h2f|f2h|bf2f|f2bf|rh|rbf)\(")


def prelude(src: str) -> str:
    """The helper definitions `src` uses."""
    return HALF_PRELUDE if _HELPERS.search(src) else ""


def bits(buf):
    """A CuPy buffer as CuPy kernels take it (16-bit floats as a uint16 view)."""
    return buf.view(cp.uint16) if buf.dtype in LOW else buf


def ctype(dtype) -> str:
    try:
        return _CTYPE[np.dtype(dtype)]
    except KeyError:
        raise Unsupported(f"no CUDA C type for {dtypes.short_name(dtype)}") from None


def _debug(kind: str, name: str, src: str):
    if debug_level() >= 3:
        print(f"// --- mirax CUDA {kind} {name} ---\n{src}", file=sys.stderr)


# --- literals and expressions -----------------------------------------------------------------
def literal(value, dtype) -> str:
    dtype = np.dtype(dtype)
    v = np.asarray(value).reshape(()).item()
    ct = ctype(dtype)
    if dtype == np.bool_:
        return "true" if v else "false"
    if ct in ("float", "double"):
        v = float(v)
        f = ct == "float"
        if math.isnan(v):
            return "__int_as_float(0x7fc00000)" if f else \
                "__longlong_as_double(0x7ff8000000000000LL)"
        if math.isinf(v):
            inf = "__int_as_float(0x7f800000)" if f else \
                "__longlong_as_double(0x7ff0000000000000LL)"
            return inf if v > 0 else f"(-{inf})"
        return f"({v!r}f)" if f else f"({v!r})"
    if dtype.kind == "u":
        return f"(({ct}){int(v)}ULL)"
    return f"(({ct}){int(v)}LL)"


def math_fn(ct, name):
    return name + "f" if ct == "float" else name


def _isfloat(ct):
    return ct in ("float", "double")


def _unary(name, a, ct):
    if name == "neg":
        return f"(-{a})"
    if name == "abs":
        return f"{math_fn(ct, 'fabs')}({a})" if _isfloat(ct) else f"({a} < 0 ? -{a} : {a})"
    if name == "sign":
        s = f"({ct})(({a} > 0) - ({a} < 0))"
        return f"(isnan({a}) ? {a} : {s})" if _isfloat(ct) else s
    if name == "not":
        return f"(!{a})" if ct == "bool" else f"(({ct})~{a})"
    if name == "is_finite":
        return f"isfinite({a})"
    if not _isfloat(ct):
        raise Unsupported(f"{name} on {ct}")
    one = "1.0f" if ct == "float" else "1.0"
    simple = {"exp": "exp", "exp2": "exp2", "expm1": "expm1", "log": "log", "log1p": "log1p",
              "sqrt": "sqrt", "cbrt": "cbrt", "tanh": "tanh", "sin": "sin", "cos": "cos",
              "tan": "tan", "asin": "asin", "acos": "acos", "atan": "atan", "sinh": "sinh",
              "cosh": "cosh", "asinh": "asinh", "acosh": "acosh", "atanh": "atanh",
              "erf": "erf", "erfc": "erfc", "erf_inv": "erfinv", "lgamma": "lgamma",
              "floor": "floor", "ceil": "ceil", "trunc": "trunc", "round": "rint"}
    if name in simple:
        return f"{math_fn(ct, simple[name])}({a})"
    if name == "rsqrt":
        return f"({one} / {math_fn(ct, 'sqrt')}({a}))"
    if name == "logistic":
        return f"({one} / ({one} + {math_fn(ct, 'exp')}(-{a})))"
    raise Unsupported(name)


def _binary(name, a, b, ct):
    arith = {"add": "+", "sub": "-", "mul": "*"}
    if name in arith:
        return f"({a} {arith[name]} {b})"
    cmp = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
    if name in cmp:
        return f"({a} {cmp[name]} {b})"
    if name in ("max", "min"):
        op = ">" if name == "max" else "<"
        if _isfloat(ct):  # NaN-propagating, as np.maximum / np.minimum
            return f"((isnan({a}) || {a} {op} {b}) ? {a} : {b})"
        return f"({a} {op} {b} ? {a} : {b})"
    if name in ("and", "or", "xor"):
        if ct == "bool":
            return {"and": f"({a} && {b})", "or": f"({a} || {b})", "xor": f"({a} != {b})"}[name]
        return f"(({ct})({a} {dict(zip(('and', 'or', 'xor'), '&|^'))[name]} {b}))"
    if not _isfloat(ct):
        return _int_binary(name, a, b, ct)
    if name == "div":
        return f"({a} / {b})"
    if name == "mul_strong":  # the strong-zero product of derivative rules: 0 * inf = 0
        return f"({a} == 0 ? ({ct})0 : {a} * {b})"
    fns = {"rem": "fmod", "pow": "pow", "atan2": "atan2", "nextafter": "nextafter"}
    if name in fns:
        return f"{math_fn(ct, fns[name])}({a}, {b})"
    raise Unsupported(name)


def _int_binary(name, a, b, ct):
    """Integer ops with the reference impls' edge cases: division truncates and x / 0 = 0,
    rem is C's (fmod's) with x % 0 = 0, shifts by a count outside [0, bits) give 0 (or -1
    for a negative value shifted right), as NumPy."""
    if ct == "bool":
        raise Unsupported(f"{name} on bool")
    if name in ("div", "rem"):
        return f"({b} == 0 ? ({ct})0 : ({ct})({a} {'/' if name == 'div' else '%'} {b}))"
    if name in ("shift_left", "shift_right"):
        ok = f"(unsigned long long)({b}) < sizeof({ct}) * 8"
        if name == "shift_left":
            return f"({ok} ? ({ct})((unsigned long long)({a}) << {b}) : ({ct})0)"
        return f"({ok} ? ({ct})({a} >> {b}) : ({ct})({a} < 0 ? -1 : 0))"
    raise Unsupported(f"{name} on {ct}")


def _convert(a, src, dst) -> str:
    src, dst = np.dtype(src), np.dtype(dst)
    ct = ctype(dst)
    if dst == np.bool_:
        return f"({a} != 0)"
    return rounded(dst, f"(({ct})({a}))")


def node_expr(node, args: list[str]) -> str:
    """The C expression for one elementwise node over argument expressions `args`."""
    name = node.prim.name
    out = node.outputs[0].aval.dtype
    if name == "convert_element_type":
        return _convert(args[0], node.inputs[0].aval.dtype, out)
    if name == "select":
        return f"({args[0]} ? {args[1]} : {args[2]})"
    ct = ctype(node.inputs[0].aval.dtype)
    if name == "nextafter" and out in LOW:  # the next 16-bit float, not the next float32
        raise Unsupported(f"nextafter on {dtypes.short_name(out)}")
    if name in ew.UNARY_OPS:
        e = _unary(name, args[0], ct)
    elif name in ew.BINARY_OPS:
        e = _binary(name, args[0], args[1], ct)
    else:
        raise Unsupported(name)
    if config.get("cuda_excess_precision"):   # float32 until a store (or a convert) rounds
        return e
    return rounded(out, e)  # each op rounds to a 16-bit float, as NumPy's loops do


# --- fusion kernels ---------------------------------------------------------------------------
_kernels: dict = {}  # (kind, source) -> compiled CuPy kernel object: `compiled`
failures: list = []  # flat and two-stage kernels NVRTC refused: CuPy's kernels run instead
# (a two-stage kernel that stores chain values too: the group runs op by op)

REDUCE = {  # name -> (reduce_expr, identity for floats, identity for ints)
    "reduce_sum": ("a + b", "0", "0"),
    "reduce_prod": ("a * b", "1", "1"),
    "reduce_max": ("(isnan(a) || a > b) ? a : b", "-INF", "MIN"),
    "reduce_min": ("(isnan(a) || a < b) ? a : b", "INF", "MAX"),
}


def _chain(sub, inline: dict, stop=None):
    """Body lines computing every node of `sub` (up to `stop`), the C name of each Var,
    and the parameters: (lines, names, params) with params [(index, Var)]."""
    names, params, lines = {}, [], []
    for i, v in enumerate(sub.inputs):
        if v in inline:
            names[v] = literal(inline[v], v.aval.dtype)
        else:
            params.append((i, v))
            names[v] = f"a{i}"
            lines.append(f"const {ctype(v.aval.dtype)} a{i} = {load(v.aval.dtype, f'x{i}')};")
    for k, node in enumerate(sub.nodes):
        if node is stop:
            break
        o = node.outputs[0]
        lines.append(f"const {ctype(o.aval.dtype)} v{k} = "
                     f"{node_expr(node, [names[v] for v in node.inputs])};")
        names[o] = f"v{k}"
    return lines, names, params


def _param_decl(params) -> str:
    for _, v in params:
        if np.dtype(v.aval.dtype) not in _PARAM:
            raise Unsupported(f"parameter of {dtypes.short_name(v.aval.dtype)}")
    return ", ".join(f"{_PARAM[np.dtype(v.aval.dtype)]} x{i}" for i, v in params)


def compiled(kind, src, make, name=""):
    k = _kernels.get((kind, src))
    if k is None:
        _debug(kind, name, src)
        k = _kernels.setdefault((kind, src), make())  # concurrent compiles: first wins
    return k


def elementwise_kernel(sub, inline: dict, outputs, name="fused"):
    """A callable(*inputs) -> [outputs] computing `outputs` (Vars of `sub`) in one kernel."""
    lines, names, params = _chain(sub, inline)
    if not params:
        raise Unsupported("no array input")
    for j, o in enumerate(outputs):
        if np.dtype(o.aval.dtype) not in _PARAM:
            raise Unsupported("output dtype")
        lines.append(f"y{j} = {store(o.aval.dtype, names[o])};")
    in_decl = _param_decl(params)
    out_decl = ", ".join(f"{_PARAM[np.dtype(o.aval.dtype)]} y{j}" for j, o in enumerate(outputs))
    body = "\n".join(lines)
    kname = f"mirax_{name}"[:60]
    pre = prelude(body)
    kern = compiled("elementwise", f"{in_decl}|{out_decl}|{body}",
                     lambda: cp.ElementwiseKernel(in_decl, out_decl, body, kname, preamble=pre))
    idx = [i for i, _ in params]
    shape = tuple(outputs[0].aval.shape)
    out_dtypes = [o.aval.dtype for o in outputs]
    flat = [_flat_kernel(params, lines, names, outputs, shape, kname)]

    def run(*bufs):
        outs = [cp.empty(shape, d) for d in out_dtypes]
        ins = [bufs[i] for i in idx]
        # the flat kernel's vector moves want their operands 16-byte aligned
        if flat[0] is not None and all(b.flags.c_contiguous and (b.size == 1 or
                                                                 b.data.ptr % 16 == 0)
                                       for b in ins):
            try:
                flat[0](ins, outs)
                return outs
            except Exception as e:  # noqa: BLE001 - NVRTC refused it: the CuPy kernel
                failures.append(f"{kname}: {type(e).__name__}: {str(e)[:300]}")
                flat[0] = None
        # strided inputs: CuPy's indexer handles any layout
        kern(*[bits(b) for b in ins], *[bits(o) for o in outs])
        return outs
    run.source = body
    return run


def _flat_kernel(params, lines, names, outputs, shape, kname):
    """A raw kernel with flat indices, when every input is the full shape, a block of it
    (a bias over the last axes: index i % m; per-row values [B, T, 1] of [B, T, D]: index
    i / D, then % m) or one value; None otherwise. It skips CuPy's per-element n-d index
    arithmetic."""
    n = int(np.prod(shape))
    itype = _itype(n)
    at, vec = {}, {}  # input -> its index expression; -> where its UNROLL values start
    for i, v in params:
        vs = tuple(v.aval.shape)
        while vs and vs[0] == 1:
            vs = vs[1:]
        ones = 0  # trailing size-1 dims: broadcast over the innermost values
        while ones < len(vs) and vs[len(vs) - 1 - ones] == 1:
            ones += 1
        core = vs[:len(vs) - ones]
        inner = int(np.prod(shape[len(shape) - ones:])) if ones else 1
        m = int(np.prod(core))
        if m == 1:
            at[i] = None
        elif core == shape[len(shape) - len(vs):len(shape) - ones]:
            idx = f"i / ({itype}){inner}" if inner > 1 else "i"
            at[i] = idx if m * inner == n else f"({idx}) % ({itype}){m}"
            if inner == 1 and m % 4 == 0:  # a thread's 4 values are neighbours here too
                vec[i] = "i0" if m == n else f"i0 % ({itype}){m}"
        else:
            return None
    decl, pre, loads, compute = _staged(params, lines, at)
    decl += [f"{storage(o.aval.dtype)}* __restrict__ y{j}" for j, o in enumerate(outputs)]
    decl.append(f"const {itype} n")
    # a thread's UNROLL (4) neighbouring values: operands of the full shape, and blocks of
    # a multiple of 4 values (a bias), move as one vector each (16 bytes for 4-byte types);
    # the rest (per-row values) one by one
    loads = [ln for ln in loads if not any(ln.startswith(f"r{i}[k] =") for i in vec)]
    var = dict(params)
    pre = [f"alignas(16) {ln}" if ln.endswith("[UNROLL];") else ln for ln in pre]
    pre += [f"alignas(16) {storage(o.aval.dtype)} o{j}[UNROLL];" for j, o in enumerate(outputs)]
    compute += [f"o{j}[k] = {store(o.aval.dtype, names[o])};" for j, o in enumerate(outputs)]
    vec_in = [ln for i, off in vec.items()
              for ln in _moves(f"r{i}", f"x{i} + {off}", var[i].aval.dtype)]
    one_in = [f"r{i}[k] = x{i}[{at[i]}];" for i in vec]
    vec_out = [ln for j, o in enumerate(outputs)
               for ln in _moves(f"y{j} + i0", f"o{j}", o.aval.dtype)]
    one_out = [f"y{j}[i] = o{j}[k];" for j in range(len(outputs))]

    def either(vec, one):  # the vectors for a whole group of UNROLL, else value by value
        return ("  if (whole) {\n" + "".join(f"    {ln}\n" for ln in vec) + "  } else {\n"
                + _unrolled(itype, "i", "i0", "n", [], one, "    ", step="1") + "  }\n")
    src = (f"#define BLOCK 256\n#define UNROLL 4\n"
           f'extern "C" __global__ void {kname}({", ".join(decl)}) {{\n'
           f"  const {itype} i0 = (blockIdx.x * ({itype})BLOCK + threadIdx.x) * UNROLL;\n"
           f"  const bool whole = i0 + UNROLL <= n;\n"
           + "".join(f"  {ln}\n" for ln in pre)
           + either(vec_in, one_in)
           + (_unrolled(itype, "i", "i0", "n", [], loads, "  ", step="1") if loads else "")
           + _unrolled(itype, "i", "i0", "n", [], compute, "  ", step="1")
           + either(vec_out, one_out) + "}\n")
    src = prelude(src) + src
    kern = compiled("flat elementwise", src, lambda: cp.RawKernel(src, kname))
    scalar_n = np.int32(n) if itype == "int" else np.int64(n)
    blocks = max(1, -(-n // 1024))  # BLOCK * UNROLL values per block

    def launch(ins, outs):
        if n:
            kern((blocks,), (256,), (*ins, *outs, scalar_n))
    return launch


def _moves(dst: str, src: str, dtype) -> list[str]:
    """Statements copying UNROLL (4) elements of `dtype`'s storage from pointer src to dst
    as vector moves of at most 16 bytes (both pointers aligned to the moves' size)."""
    size = 4 * np.dtype(dtype).itemsize
    vt = {4: "unsigned int", 8: "uint2"}.get(size, "uint4")
    return [f"reinterpret_cast<{vt}*>({dst})[{c}] = reinterpret_cast<const {vt}*>({src})[{c}];"
            for c in range(max(1, size // 16))]


def _itype(n: int) -> str:
    """The index type for n values (base + k * BLOCK never overflows)."""
    return "int" if n < 2 ** 31 - 4096 else "long long"


def _staged(params, lines, at: dict, once=None):
    """The pieces of a raw kernel over the chain `lines` (from _chain) where input i is read
    at index expression at[i] (None: one value per thread, x[once[i]] or x[0], loaded once):
    (parameter declarations, per-thread setup, loads into registers, the chain computed)."""
    decl, pre, loads, regs = [], [], [], []
    for i, v in params:
        dt = v.aval.dtype
        decl.append(f"const {storage(dt)}* __restrict__ x{i}")
        if at[i] is None:
            pre.append(f"const {ctype(dt)} a{i} = {load(dt, f'x{i}[{(once or {}).get(i, 0)}]')};")
            continue
        pre.append(f"{storage(dt)} r{i}[UNROLL];")
        loads.append(f"r{i}[k] = x{i}[{at[i]}];")
        regs.append(f"const {ctype(dt)} a{i} = {load(dt, f'r{i}[k]')};")
    chain = [ln for ln in lines if ln.startswith("const ")  # the chain, minus loads & stores
             and not ln.split("=")[0].split()[-1].startswith("a")]
    return decl, pre, loads, regs + chain


def _unrolled(itype, i, base, n, head, body, indent, step="BLOCK") -> str:
    """`for k < UNROLL: i = base + k * step; if (i < n) {head; body}`, unrolled. Each
    thread handles UNROLL values `step` apart (BLOCK: coalesced); kernels emit one such loop
    for the loads and one for the computation, so several loads are in flight per thread."""
    return (f"{indent}#pragma unroll\n{indent}for (int k = 0; k < UNROLL; k++) {{\n"
            f"{indent}  const {itype} {i} = {base} + k * {step};\n{indent}  if ({i} < {n}) {{\n"
            + "".join(f"{indent}    {ln}\n" for ln in head + body) + f"{indent}  }}\n{indent}}}\n")


def reduction_kernel(sub, inline: dict, name="fused"):
    """A callable for a chain ending in one reduction. Its result is the only output, or
    (`with_values(sub)`: a generated kernel) the chain's values of the full shape that the
    plan needs too (a loss mean(square(y)) whose y the backward pass reads; a bias gradient
    whose values feed a GEMM)."""
    red = sub.nodes[-1]
    src = red.inputs[0]
    lines, names, params = _chain(sub, inline, stop=red)
    if not params:
        raise Unsupported("no array input")
    dt = np.dtype(red.outputs[0].aval.dtype)
    if dt not in _PARAM:
        raise Unsupported("reduction dtype")
    extras = [o for o in sub.outputs if o is not red.outputs[0]]
    if extras and not with_values(sub):
        raise Unsupported("chain values besides the reduction")
    acc, identity, reduce_expr = _reduction_op(red.prim.name, dt)
    tparams = ", ".join(f"typename T{i}" for i, _ in params)
    fargs = ", ".join(f"T{i} x{i}" for i, _ in params)
    preamble = (f"template <{tparams}>\n__device__ __forceinline__ {acc} mirax_map({fargs}) {{\n"
                + "\n".join("  " + ln for ln in lines)
                + f"\n  return ({acc})({names[src]});\n}}\n")
    in_decl = _param_decl(params)
    call = f"mirax_map({', '.join(f'x{i}' for i, _ in params)})"
    preamble = prelude(preamble + store(dt, "a")) + preamble
    out_decl = f"{_PARAM[dt]} y"
    post = f"y = {store(dt, 'a')}" if dt in LOW else f"y = ({acc})a"
    kname = f"mirax_{name}"[:60]
    src_key = f"{in_decl}|{out_decl}|{preamble}// map: {call}; reduce: {reduce_expr}, {identity}"
    kern = compiled("reduction", src_key, lambda:
                     cp.ReductionKernel(in_decl, out_decl, call, reduce_expr, post,
                                        identity, kname, reduce_type=acc, preamble=preamble))
    idx = [i for i, _ in params]
    shape = tuple(src.aval.shape)
    axes = tuple(red.params["axes"])
    low = dt if dt in LOW else None
    fast = None
    layout = reduction_layout(red)
    if layout is not None:
        try:
            fast = _generated(layout, params, lines, names, red, extras,
                              (acc, identity, reduce_expr), kname)
        except Exception as e:  # noqa: BLE001 - NVRTC refused it: CuPy's kernel
            failures.append(f"{kname}: {type(e).__name__}: {str(e)[:300]}")
            if extras:
                raise Unsupported(f"{layout} kernel: {e}") from None
    pos = {o: j for j, o in enumerate([red.outputs[0]] + extras)}

    def run(*bufs):
        ins = [bufs[i] for i in idx]
        if fast is not None and (extras or all(b.flags.c_contiguous for b in ins)):
            outs = fast([b if b.flags.c_contiguous else cp.ascontiguousarray(b) for b in ins])
            return [outs[pos[o]] for o in sub.outputs]
        # strided inputs: CuPy's kernel indexes any layout
        out = kern(*[bits(cp.broadcast_to(b, shape)) for b in ins], axis=axes)
        return [out.view(low) if low is not None else out]
    run.source = preamble
    return run


def with_values(sub) -> bool:
    """Does the generated kernel of `sub` (a chain ending in a reduction, see `reduction_layout`)
    store the chain's other outputs too (each of the reduced shape, made by the chain)?"""
    red = sub.nodes[-1]
    shape = tuple(red.inputs[0].aval.shape)
    made = {o for n in sub.nodes[:-1] for o in n.outputs}
    return reduction_layout(red) is not None and all(
        o is red.outputs[0] or (o in made and tuple(o.aval.shape) == shape
                                and np.dtype(o.aval.dtype) in _PARAM) for o in sub.outputs)


def reduction_layout(red) -> str | None:
    """Which generated kernel reduces `red` (None: CuPy's ReductionKernel), unless
    MIRAX_CUDA_TWO_STAGE=0:
    - "few": fewer than FEW_OUTPUTS outputs of many values each (one output: any number),
      the two-stage kernel with several blocks per output;
    - "rows": the innermost dimension is reduced, at least ROW_MIN values (row sums of a
      layer norm's backward), the same kernel with one block per output;
    - "columns": the innermost dimension is kept (bias and norm-weight gradients: sums over
      the leading axes), the column kernel, whose threads run along the kept dimension."""
    if not config.get("cuda_two_stage"):
        return None
    src = red.inputs[0]
    n, out_size = src.aval.size, int(np.prod(red.outputs[0].aval.shape))
    if n == 0:
        return None
    if out_size < FEW_OUTPUTS and (out_size == 1 or n >= FEW_OUTPUTS * out_size):
        return "few"
    axes = {a % src.aval.ndim for a in red.params["axes"]}
    dims = _collapsed(tuple(src.aval.shape), axes, [("f", src)])
    if not dims:
        return None
    size, reduced, _ = dims[-1]
    if reduced:
        return "rows" if size >= ROW_MIN and out_size <= MAX_GRID_Y else None
    return "columns"


FEW_OUTPUTS = 1024  # fewer outputs than this (and many values each): the two-stage kernel
ROW_MIN = 256  # rows of at least this many values: one block of 256 threads per output
MAX_GRID_Y = 65535
_SHUFFLED = ("float", "double", "int", "unsigned int", "long long", "unsigned long long")

_REDUCE_OPS = r"""typedef {acc} acc_t;
__device__ __forceinline__ acc_t mirax_red(acc_t a, acc_t b) {{ return {expr}; }}
"""

_TWO_STAGE = r"""#define BLOCK 256
#define UNROLL 4
__device__ __forceinline__ acc_t mirax_shfl(acc_t v, int o) {{
  return (acc_t)__shfl_down_sync(0xffffffffu, ({shfl})v, o);
}}
__device__ __forceinline__ acc_t mirax_warp(acc_t v) {{
  for (int o = 16; o > 0; o >>= 1) v = mirax_red(v, mirax_shfl(v, o));
  return v;
}}
// the block's values combined in a fixed order; the result is thread 0's
__device__ acc_t mirax_block(acc_t v) {{
  __shared__ acc_t sh[BLOCK / 32];
  v = mirax_warp(v);
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x < 32) v = mirax_warp(threadIdx.x < BLOCK / 32 ? sh[threadIdx.x] : {ident});
  return v;
}}
// stage 1: block (c, o) folds its strided share of output o's R values into one partial
// (the final value itself when there is one block per output)
extern "C" __global__ void {name}({decl}, {out}* __restrict__ y,
                                  acc_t* __restrict__ part) {{
  const {it} o = blockIdx.y, c = blockIdx.x;
{pre}  acc_t acc = {ident};
  for ({it} rb = c * ({it})(BLOCK * UNROLL) + threadIdx.x; rb < ({it}){R};
       rb += ({it})gridDim.x * (BLOCK * UNROLL)) {{
{loads}{compute}  }}
  acc = mirax_block(acc);
  if (threadIdx.x == 0) {{
    if (gridDim.x == 1) y[o] = {store};
    else part[o * gridDim.x + c] = acc;
  }}
}}
// stage 2: one block per output folds its `chunks` partials
extern "C" __global__ void {name}_2(const acc_t* __restrict__ part, {out}* __restrict__ y,
                                    const int chunks) {{
  const int o = blockIdx.x;
  acc_t acc = {ident};
  for (int j = threadIdx.x; j < chunks; j += BLOCK) acc = mirax_red(acc, part[o * chunks + j]);
  acc = mirax_block(acc);
  if (threadIdx.x == 0) y[o] = {store};
}}
"""

_COLUMNS = r"""#define BX 64
#define BY 4
#define UNROLL 8
// stage 1: block (x, c) holds BX outputs (one a thread column: neighbouring outputs,
// neighbouring addresses) and BY threads per output, which fold every BY-th of the chunk's
// `per` values; the BY partials are folded in shared memory in a fixed order
extern "C" __global__ void {name}({decl}, {out}* __restrict__ y,
                                  acc_t* __restrict__ part, const {it} per) {{
  __shared__ acc_t sh[BY][BX];
  const int tx = threadIdx.x % BX, ty = threadIdx.x / BX;
  const bool live = ({it})blockIdx.x * BX + tx < ({it}){O};
  const {it} o = live ? ({it})blockIdx.x * BX + tx : 0;
  const {it} stop = ({it})(blockIdx.y + 1) * per;
  const {it} end = !live ? 0 : stop < ({it}){R} ? stop : ({it}){R};
{pre}  acc_t acc = {ident};
  for ({it} rb = ({it})blockIdx.y * per + ty; rb < end; rb += BY * UNROLL) {{
{loads}{compute}  }}
  sh[ty][tx] = acc;
  __syncthreads();
  if (ty == 0 && live) {{
    for (int j = 1; j < BY; j++) acc = mirax_red(acc, sh[j][tx]);
    if (gridDim.y == 1) y[o] = {store};
    else part[({it})blockIdx.y * {O} + o] = acc;
  }}
}}
// stage 2: a thread per output folds its `chunks` partials in order
extern "C" __global__ void {name}_2(const acc_t* __restrict__ part, {out}* __restrict__ y,
                                    const int chunks) {{
  const {it} o = ({it})blockIdx.x * 256 + threadIdx.x;
  if (o >= ({it}){O}) return;
  acc_t acc = {ident};
  for (int j = 0; j < chunks; j++) acc = mirax_red(acc, part[({it})j * {O} + o]);
  y[o] = {store};
}}
"""


def _generated(layout, params, lines, names, red, extras, op, kname):
    """The generated kernels of a reduction (`reduction_layout`), returning run(inputs) -> [result,
    *extras]. Stage 1 computes the chain per value, stores it where it is an output in
    `extras`, and folds it into partials; stage 2 (when there is more than one partial per
    output) folds each output's partials. Deterministic: no atomics; the fold order
    depends only on the shape and the device's multiprocessor count.
    - "few" / "rows" (_TWO_STAGE): `chunks` blocks per output run a grid-stride loop,
      folded per thread, then per block by warp shuffles; one partial per block.
    - "columns" (_COLUMNS): 64 neighbouring outputs a block, their values read
      row by row (coalesced), in `chunks` slices of the reduced values.
    Inputs are read at index arithmetic over the collapsed dimensions (broadcast dims:
    stride 0), so biases and scalars are not materialized. Measured on the H200
    (benchmarks/gpu.py attention rows): the loss sum(o.astype(f32) * w) over 8.4M values
    took about 6.3 ms through CuPy's ReductionKernel and nothing measurable through this
    kernel (jit of the value and gradient: f32 11.45 -> 5.12 ms, bf16 7.74 -> 1.37 ms)."""
    acc, identity, reduce_expr = op
    src = red.inputs[0]
    shape = tuple(src.aval.shape)
    axes = {a % len(shape) for a in red.params["axes"]} if shape else set()
    dt = np.dtype(red.outputs[0].aval.dtype)
    n = int(np.prod(shape))
    it = _itype(n)
    nred = int(np.prod([shape[d] for d in axes]))
    out_shape = tuple(red.outputs[0].aval.shape)
    out_size = int(np.prod(out_shape))
    dims = _collapsed(shape, axes, params + [("f", src)])  # "f": the flat index in `shape`
    kept = [(size, st) for size, r, st in dims if not r]
    rdims = [(size, st) for size, r, st in dims if r]
    pre, at, once = _coords("o", "oc", kept, it), {}, {}
    rc = _coords("r", "rc", rdims, it)
    contiguous = _strides([size for size, _ in rdims])
    for i, _ in params + [("f", src)]:
        ko = _offset("oc", [st[i] for _, st in kept])
        rs = [st[i] for _, st in rdims]
        ro = "r" if rs and rs == contiguous else _offset("rc", rs)
        at[i] = None if ro == "0" else ro if ko == "0" else f"ob{i} + {ro}"
        if ko != "0":  # the offset of the thread's output (one value: read once)
            pre.append(f"const {it} ob{i} = {ko};")
            once[i] = f"ob{i}"
    flat = at.pop("f") or once.get("f", "0")
    decl, setup, loads, compute = _staged(params, lines, at, once)
    for j, o in enumerate(extras):
        decl.append(f"{storage(o.aval.dtype)}* __restrict__ e{j}")
        compute.append(f"e{j}[{flat}] = {store(o.aval.dtype, names[o])};")
    compute.append(f"acc = mirax_red(acc, (acc_t)({names[src]}));")
    uses_rc = [a for a in list(at.values()) + [flat] if a is not None and "rc" in a]
    columns = layout == "columns"
    step, end = ("BY", "end") if columns else ("BLOCK", f"({it}){nred}")
    name = kname[:57]
    code = _REDUCE_OPS.format(acc=acc, expr=reduce_expr) + (_COLUMNS if columns else _TWO_STAGE)\
        .format(shfl=acc if acc in _SHUFFLED else "int", ident=identity, name=name,
                decl=", ".join(decl), out=storage(dt), it=it, R=nred, O=out_size,
                pre="".join(f"  {ln}\n" for ln in pre + setup),
                loads=_unrolled(it, "r", "rb", end, rc if uses_rc else [], loads, "    ", step),
                compute=_unrolled(it, "r", "rb", end, rc if "rc" in flat else [], compute,
                                  "    ", step),
                store=store(dt, "acc"))
    code = prelude(code) + code
    mod = compiled(f"{layout} reduction", code, lambda: cp.RawModule(code=code))
    # (get_function compiles: a source NVRTC refuses fails here, not in a plan's run)
    stage1, stage2 = mod.get_function(name), mod.get_function(name + "_2")
    blocks = 8 * _sm_count(cp.cuda.runtime.getDevice())  # 8 blocks of 256 fill an SM
    if columns:  # slices of at least BY * UNROLL values
        grid_x = -(-out_size // 64)
        chunks = max(1, min(-(-blocks // grid_x), -(-nred // 32), MAX_GRID_Y))
        per = -(-nred // chunks)
        chunks = -(-nred // per)
        per = np.int32(per) if it == "int" else np.int64(per)
        grid1, extra_args, grid2 = (grid_x, chunks), (per,), -(-out_size // 256)
    else:
        chunks = max(1, min(-(-blocks // max(out_size, 1)), -(-nred // 1024)))
        grid1, extra_args, grid2 = (chunks, out_size), (), out_size
    adt = np.dtype({"float": np.float32, "double": np.float64}.get(acc, dt))

    def empty(shape, dtype):  # (16-bit floats: allocated as their bits)
        return cp.empty(shape, np.uint16 if np.dtype(dtype) in LOW else dtype)

    def run(ins):
        y = empty(out_shape, dt)
        ext = [empty(shape, o.aval.dtype) for o in extras]
        if out_size:
            part = cp.empty(out_size * chunks, adt) if chunks > 1 else y
            stage1(grid1, (256,), (*[bits(b) for b in ins], *ext, y, part, *extra_args))
            if chunks > 1:
                stage2((grid2,), (256,), (part, y, np.int32(chunks)))
        return [b.view(d) if d in LOW else b
                for b, d in zip([y] + ext, [dt] + [np.dtype(o.aval.dtype) for o in extras])]
    return run


def _collapsed(shape, axes, params):
    """The iteration space of a reduction as [(size, reduced, {input: element stride})]:
    size-1 dims dropped, inputs' broadcast dims given stride 0, and neighbouring dims
    merged where they are both reduced or both kept and every input steps over them alike."""
    dims = []
    for d, size in enumerate(shape):
        if size == 1:
            continue
        st = {}
        for i, v in params:
            vs = (1,) * (len(shape) - v.aval.ndim) + tuple(v.aval.shape)
            st[i] = 0 if vs[d] == 1 else int(np.prod(vs[d + 1:]))
        if dims and dims[-1][1] == (d in axes) and all(
                dims[-1][2][i] == st[i] * size for i in st):
            dims[-1] = (dims[-1][0] * size, d in axes, st)
        else:
            dims.append((size, d in axes, st))
    return dims


def _strides(sizes) -> list:
    """Row-major strides of `sizes`."""
    return [int(np.prod(sizes[j + 1:])) for j in range(len(sizes))]


def _coords(var, prefix, dims, it) -> list:
    """Lines splitting the flat index `var` over `dims` into coordinates prefix0, prefix1..."""
    if not dims:
        return []
    out = [f"{it} {prefix}_t = {var};"]
    for j in range(len(dims) - 1, 0, -1):
        out.append(f"const {it} {prefix}{j} = {prefix}_t % ({it}){dims[j][0]}; "
                   f"{prefix}_t /= ({it}){dims[j][0]};")
    out.append(f"const {it} {prefix}0 = {prefix}_t;")
    return out


def _offset(prefix, strides) -> str:
    """sum of coordinate * stride (zero strides left out), or "0"."""
    terms = [f"{prefix}{j}" + (f" * {s}" if s != 1 else "") for j, s in enumerate(strides) if s]
    return " + ".join(terms) or "0"


@functools.lru_cache(maxsize=None)
def _sm_count(device: int) -> int:
    return int(cp.cuda.Device(device).attributes["MultiProcessorCount"])


def _reduction_op(prim_name: str, dt) -> tuple[str, str, str]:
    """(accumulator type, identity, reduce expression over a, b) of a reduction to dt.
    16-bit floats accumulate in float32; max/min propagate NaN, as NumPy."""
    expr, f_id, i_id = REDUCE[prim_name]
    if dt.kind == "f" or dt in LOW:
        acc = "double" if dt == np.float64 else "float"
        inf = literal(np.inf, np.float64 if dt == np.float64 else np.float32)
        return acc, {"0": "0", "1": "1", "-INF": f"(-{inf})", "INF": inf}[f_id], expr
    if dt == np.bool_:  # max: any, min: all
        if prim_name not in ("reduce_max", "reduce_min"):
            raise Unsupported(f"{prim_name} of bool")
        return ("bool", "false", "a || b") if prim_name == "reduce_max" else \
            ("bool", "true", "a && b")
    info = np.iinfo(dt)
    lim = {"MIN": str(info.min), "MAX": str(info.max)}
    return ctype(dt), lim.get(i_id, i_id) + ("LL" if dt.kind == "i" else "ULL"), \
        expr.replace("isnan(a) || ", "")
