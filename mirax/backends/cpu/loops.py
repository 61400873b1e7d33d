"""Compiled loops for fusion nodes on the CPU, through numba (an optional dependency).

blocked.py runs a fusion node as NumPy ufunc calls over cache-sized chunks: every op still
reads and writes a temporary. Here the same group becomes one generated loop nest that
numba compiles: each element goes through the whole chain in registers, and the group's
inputs and outputs are touched once. It is used only where it measures faster, which is
decided by the ops in the group:
- arithmetic, comparisons, select, converts, sqrt (LLVM vectorizes these loops): the Adam
  update runs 4x faster than blocked (0.6 vs 2.4 ms on 400k f32 elements, one thread);
- float32 exp, tanh, logistic, sin, cos, log and log1p are taken as vecmath.py's
  branch-free versions, which LLVM vectorizes (within 1, 1.5, 2.5, 0.51, 0.51, 1 and 2.5
  ulp; a loop that meets a sin / cos argument beyond vecmath.SIN_LIMIT runs again with
  libm's); the other transcendental functions, and float64 ones, are not: numba calls
  scalar libm for them, 3x (exp) to 60x (tanh) slower than NumPy's SIMD loops;
- sums over the leading axes (bias gradients: `acc[j] += x[i, j]`, the order NumPy's
  axis-0 sum uses) or over the trailing ones, rows of at most ROW_SUM_MAX values (a row's
  values into a buffer, then NumPy's pairwise sum of them: 8 accumulators, the same
  additions in the same order, `_row_sum`); full reductions and longer rows stay with
  NumPy.

Layout is layout.py's: values of shape S are viewed as (L, R) (flat groups as one row,
(1, size), so that the inner loop is the long one), every outside input is `full`
(indexed [i, j]), `lead` ([j]), `trail` ([i]) or `one` ([0]). The loop bounds are
arguments, so one compiled kernel serves every shape with the same structure (Adam on
every layer's weight matrix). Elementwise results equal the unfused plan's bit for
bit (IEEE ops, no fast-math contraction), but for those float32 transcendental functions
(within their ulp bounds of the exact results, as NumPy's own). Kernels are cached in
memory and, compiled, on disk (`MIRAX_CACHE_DIR`, default ~/.cache/mirax) by source
hash; MIRAX_NUMBA=0 turns the path off. MIRAX_DEBUG=3 prints the source.
Threads: a generated module holds `kernel` (the loop nest over given rows and columns)
and `rows_parts` / `cols_parts`, which run it over parts (rows; a one-row group's
columns) in a `prange`: compiled parallel=True, one call from Python runs every part on
numba's native threads (threads.Native); compiled plainly (no thread-safe layer, or the
knob off), each pool thread runs a run of parts (run_parts). Groups with leading-axis
sums have parts of PART elements, sum per part and add the parts' sums in part order, so
values do not depend on the thread count or the engine; elementwise groups spread their
rows evenly over the call's threads.
"""
from __future__ import annotations

import hashlib
import importlib.util
import math
import os
import sys
import threading
from pathlib import Path

import numpy as np

from mirax.backends.cpu.threads import blas, n_threads, native, parts, pool
from mirax.core import config
from mirax.compiler.pipeline import debug_level
from mirax.backends.cpu.layout import REDUCE, externals, group_shape, layout
from mirax.graph.graph import Graph, Node
from mirax.ops.call import fusion_p

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_BOOL = np.dtype(np.bool_)
_F32 = np.dtype(np.float32)

# Scalar expressions of the primitives taken; arguments are {0}, {1}, {2}.
_FLOAT_OPS = {
    "add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})",
    "div": "({0} / {1})", "neg": "(-{0})", "max": "_np.maximum({0}, {1})",
    "min": "_np.minimum({0}, {1})", "abs": "_np.abs({0})", "sign": "_np.sign({0})",
    "sqrt": "_np.sqrt({0})", "mul_strong": "_mul_strong({0}, {1})",
}
# float32 only: vecmath.py's vectorized versions (numba would call scalar libm)
_F32_OPS = {"exp": "_exp32({0})", "tanh": "_tanh32({0})", "logistic": "_logistic32({0})",
            "sin": "_sin32({0})", "cos": "_cos32({0})", "log": "_log32({0})",
            "log1p": "_log1p32({0})"}
_RANGED = ("sin", "cos")   # exact below vecmath.SIN_LIMIT only: the kernel reports beyond
_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_BOOL_OPS = {"and": "({0} & {1})", "or": "({0} | {1})", "not": "(not {0})"}

MIN_SIZE = 1 << 12   # elements: below this the call costs more than the unfused ops
PART = 1 << 17       # elements per part run by one thread of the pool
HEAVY_PART = PART // 2   # ... and of loops with exp, tanh, sin...: an element costs
#                          several times an add's
# A part handed to a worker must outlast the hand-off: the worker's wake-up and the GIL's
# passes between the threads took 40-50 us on the 2 cores of a cloud VM. There (jitted
# single fusions, cpu_threads 1 against 2), a 16K-element tanh loop took 50 us whole and
# 102 us in two parts of 8K; 131K elements of x * 2 + 1 took 32 us whole and 92 us in two
# parts, 1M of it 409 and 299 us. So a part has at least HEAVY_PART elements (about
# 100 us of tanh) or, without transcendental ops, CHEAP_BYTES of the group's full-shape
# operands and results (memory traffic: the Adam update over 784 x 512 moves 28 bytes an
# element, x * 2 + 1 eight).
CHEAP_BYTES = 1 << 21
# On numba's native threads (threads.Native) a hand-off costs a few microseconds: parts
# can be smaller
NATIVE_HEAVY_PART = 1 << 13
NATIVE_CHEAP_BYTES = 1 << 20


def heavy_part(on_native: bool) -> int:
    """Elements a part of a loop with transcendental ops has at least, on either engine."""
    return NATIVE_HEAVY_PART if on_native else HEAVY_PART


def cheap_bytes(on_native: bool) -> int:
    """Bytes of memory traffic a part of a loop without them moves at least."""
    return NATIVE_CHEAP_BYTES if on_native else CHEAP_BYTES


MIN_OPS = 2

_numba = None
_kernels: dict = {}
_kernels_lock = threading.Lock()  # one compile per source (two threads share the file)


def available() -> bool:
    global _numba
    if not config.get("numba"):
        return False
    if _numba is None:
        try:
            import numba
            _numba = numba
        except ImportError:
            _numba = False
    return _numba is not False


def _expr(node, args) -> str | None:
    """The scalar expression of one member, or None where the loop would not win."""
    name = node.prim.name
    ins = [np.dtype(v.aval.dtype) for v in node.inputs]
    out = np.dtype(node.outputs[0].aval.dtype)
    if name in _FLOAT_OPS and not node.params and all(d in _FLOATS for d in ins):
        return _FLOAT_OPS[name].format(*args)
    if name in _F32_OPS and not node.params and ins == [_F32]:
        return _F32_OPS[name].format(*args)
    if name in _COMPARE and all(d in _FLOATS for d in ins):
        return f"({args[0]} {_COMPARE[name]} {args[1]})"
    if name in _BOOL_OPS and all(d == _BOOL for d in ins):
        return _BOOL_OPS[name].format(*args)
    if name == "select" and ins[0] == _BOOL and ins[1] in _FLOATS:
        return f"({args[1]} if {args[0]} else {args[2]})"
    if name == "is_finite" and ins[0] in _FLOATS:
        return f"_np.isfinite({args[0]})"
    if name == "convert_element_type" and (ins[0] in _FLOATS or ins[0] == _BOOL):
        if out in _FLOATS:
            return f"_np.{out.name}({args[0]})"
        if out == _BOOL:
            return f"({args[0]} != 0)"
    return None


ROW_SUM_MAX = 128   # NumPy's pairwise sum adds a row of up to 128 values in one block


def eligible(members, min_ops: int = MIN_OPS) -> bool:
    """Whether the group runs as a compiled loop (numba present, every op taken, sums over
    the leading axes or over rows of at most ROW_SUM_MAX values, not both, none read in
    the group; big enough)."""
    if not available() or math.prod(group_shape(members)) < MIN_SIZE:
        return False
    if sum(n.prim.name not in REDUCE for n in members) < min_ops:
        return False
    for n in members:
        if n.prim.name in REDUCE:
            if n.prim.name != "reduce_sum" or \
                    np.dtype(n.inputs[0].aval.dtype) not in _FLOATS:
                return False
        elif _expr(n, ["a", "b", "c"]) is None:
            return False
    lay = layout(members, externals(members))
    if lay is None or not lay.reds:
        return lay is not None
    read = {v for n in members for v in n.inputs}
    kinds = set(lay.reds.values())
    return not read & set(lay.reds) and (kinds == {"lead"} or (
        kinds == {"trail"} and lay.R <= ROW_SUM_MAX))


def source(members, ins, outs, lay) -> str:
    """The loop nest: `kernel(L, R, i0, ..., o0, ...)`; outside inputs are 2-d (L, R)
    views or 1-d vectors, elementwise outputs (L, R), leading-axis sums (R,), row sums
    (L,)."""
    name = {v: f"i{j}" for j, v in enumerate(ins)}
    load = {"full": "{}[i, j]", "lead": "{}[j]", "trail": "{}[i]", "one": "{}[0]"}
    val = {v: load[lay.ins[v]].format(name[v]) for v in ins}
    out_pos = {v: j for j, v in enumerate(outs)}
    init, body, after = ["far = False"], [], []   # after: each row's end
    for k, m in enumerate(members):
        o = m.outputs[0]
        if m.prim.name in REDUCE:
            acc = f"o{out_pos[o]}"
            if lay.reds[o] == "trail":   # NumPy adds the pairwise sum to its identity, 0
                init.append(f"t{k} = _np.empty(R, {acc}.dtype)")
                body.append(f"t{k}[j] = {val[m.inputs[0]]}")
                after.append(f"{acc}[i] = _row_sum(t{k}, R) + "
                             f"_np.{np.dtype(o.aval.dtype).name}(0)")
                continue
            init.append(f"{acc}[:] = 0")
            body.append(f"{acc}[j] += {val[m.inputs[0]]}")
            continue
        if m.prim.name in _RANGED:   # an argument beyond the range: reported
            body.append(f"a{k} = {val[m.inputs[0]]}")
            body.append(f"far |= abs(a{k}) > _SIN_LIMIT")
            val[m.inputs[0]] = f"a{k}"
        body.append(f"v{k} = {_expr(m, [val[v] for v in m.inputs])}")
        val[o] = f"v{k}"
        if o in out_pos:
            body.append(f"o{out_pos[o]}[i, j] = v{k}")
    arrays = [name[v] for v in ins] + [f"o{j}" for j in range(len(outs))]
    lines = [f"def kernel({', '.join(['L', 'R'] + arrays)}):", *("    " + ln for ln in init),
             "    for i in range(L):", "        for j in range(R):",
             *("            " + ln for ln in body), *("        " + ln for ln in after),
             "    return far"]
    # split into parts: rows s:e, leading-axis sums into row p of (parts, R) partial sums
    # (rows_parts); or, loops of one row, columns s:e (cols_parts; reshaped from a 1-d
    # slice, which numba types contiguous, as the kernel's other calls: the 2-d slice's
    # strided type kept LLVM from vectorizing the loop, 7x slower). Only the one called
    # is compiled.
    red = {o for o, kind in lay.reds.items() if kind == "lead"}   # (row sums: as `trail`)
    cuts = {"rows_parts": {"full": "{}[s:e]", "lead": "{}", "trail": "{}[s:e]", "one": "{}",
                           "sum": "{}[p]", "bounds": "e - s, R"},
            "cols_parts": {"full": "{}[0, s:e].reshape((1, e - s))", "lead": "{}[s:e]",
                           "trail": "{}", "one": "{}", "sum": "{}[s:e]",
                           "bounds": "L, e - s"}}
    for fn, cut in cuts.items():
        part_args = [cut["bounds"]] + [cut[lay.ins[v]].format(name[v]) for v in ins] + \
            [cut["sum" if o in red else lay.reds.get(o, "full")].format(f"o{j}")
             for j, o in enumerate(outs)]
        lines += ["", "", "@_parts", f"def {fn}({', '.join(['L', 'R'] + arrays)}, "
                  "starts, stops, p0, p1):", "    far = 0",
                  "    for p in _nb.prange(p0, p1):", "        s = starts[p]",
                  "        e = stops[p]", f"        far += kernel({', '.join(part_args)})",
                  "    return far"]
    return "\n".join(lines) + "\n"


def exact_source(src: str) -> str:
    """The kernel with libm's sin and cos (for arguments beyond vecmath.SIN_LIMIT)."""
    return src.replace("_sin32(", "_sin_exact(").replace("_cos32(", "_cos_exact(")


_PRELUDE = '''import numpy as _np
import numba as _nb
from mirax.backends.cpu.vecmath import exp32 as _exp32, logistic32 as _logistic32, \\
    tanh32 as _tanh32, sin32 as _sin32, cos32 as _cos32, sin_exact as _sin_exact, \\
    cos_exact as _cos_exact, SIN_LIMIT as _SIN_LIMIT, log32 as _log32, \\
    log1p32 as _log1p32, softplus32 as _softplus32   # vecmath __VECMATH__


_parts = _nb.njit(cache=__CACHE__, nogil=True, error_model="numpy", parallel=__PARALLEL__)


@_nb.njit(inline="always")
def _row_sum(t, n):
    # NumPy's pairwise sum of t[:n] for 1 <= n <= 128: below 8 in order (NumPy starts from
    # -0, which t[0] absorbs exactly), else eight accumulators over the multiples of 8,
    # combined pairwise, then the rest in order
    if n < 8:
        res = t[0]
        for k in range(1, n):
            res += t[k]
        return res
    r0, r1, r2, r3, r4, r5, r6, r7 = t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7]
    m = n - n % 8
    for k in range(8, m, 8):
        r0 += t[k]
        r1 += t[k + 1]
        r2 += t[k + 2]
        r3 += t[k + 3]
        r4 += t[k + 4]
        r5 += t[k + 5]
        r6 += t[k + 6]
        r7 += t[k + 7]
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    for k in range(m, n):
        res += t[k]
    return res


@_nb.njit(inline="always")
def _mul_strong(g, d):
    r = g * d
    if r != r and g == 0:
        return g - g
    return r


'''


def compiled(src: str):
    """The numba dispatcher of `src`'s `kernel`."""
    return _module(src, False).kernel


def compiled_parts(src: str, parallel: bool, fn: str = "kernel_parts"):
    """The numba dispatcher of `src`'s function `fn`(..., starts, stops, p0, p1), which
    runs parts p0..p1 - 1 (numba's native threads share them out where `parallel`)."""
    return getattr(_module(src, parallel), fn)


def _module(src: str, parallel: bool):
    """The module compiled from `src`: from memory (keyed by the source itself: a
    kernel's constant source string keeps its hash, so a lookup per call costs a dict
    access), the disk cache, or a fresh compile (each function at its first call)."""
    mod = _kernels.get((src, parallel))
    if mod is not None:
        return mod
    with _kernels_lock:
        mod = _kernels.get((src, parallel))
        return mod if mod is not None else _compile(src, parallel)


def _prelude() -> str:
    """The generated modules' header; it names vecmath.py's source hash, so that a change
    there compiles the loops again (numba's disk cache sees only the module's own text)."""
    global _PRELUDE_TEXT
    if _PRELUDE_TEXT is None:
        src = (Path(__file__).parent / "vecmath.py").read_bytes()
        _PRELUDE_TEXT = _PRELUDE.replace("__VECMATH__", hashlib.sha256(src).hexdigest()[:12])
    return _PRELUDE_TEXT


_PRELUDE_TEXT = None


def _compile(src: str, parallel: bool):
    text = (_prelude() + '@_nb.njit(cache=__CACHE__, nogil=True, error_model="numpy")\n' +
            src).replace("__PARALLEL__", str(parallel))
    key = hashlib.sha256(text.encode()).hexdigest()[:20]
    root = Path(config.get("cache_dir")) / "loops"
    path = root / f"k_{key}.py"
    try:
        root.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(text.replace("__CACHE__", "True"))
            os.replace(tmp, path)
        spec = importlib.util.spec_from_file_location(f"mirax_loop_{key}", path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod   # numba's disk cache finds the module by name
        spec.loader.exec_module(mod)
    except OSError:   # no writable cache: compile from memory (no disk cache)
        mod = type(sys)(f"mirax_loop_{key}")
        code = compile(text.replace("__CACHE__", "False"), f"<mirax loop {key}>", "exec")
        exec(code, mod.__dict__)
    _kernels[(src, parallel)] = mod
    return mod


def bounds(ps) -> tuple[np.ndarray, np.ndarray]:
    """The starts and stops of the parts `ps` ((start, stop) pairs), for run_parts."""
    return (np.fromiter((s for s, _ in ps), np.int64, len(ps)),
            np.fromiter((e for _, e in ps), np.int64, len(ps)))


def even_bounds(extent: int, moved: int) -> tuple[np.ndarray, np.ndarray]:
    """The bounds of [0, extent) in parts spread evenly over the call's threads, as many
    as the memory traffic `moved` (bytes) pays for (cheap_bytes), for run_parts."""
    t = max(1, min(n_threads(), extent, moved // cheap_bytes(native.ready())))
    return bounds(parts(extent, -(-extent // t)))


def summed(part_sums: np.ndarray) -> np.ndarray:
    """The parts' sums (rows of `part_sums`) added in part order: the same values at
    every thread count."""
    total = part_sums[0].copy()
    for q in part_sums[1:]:
        total += q
    return total


_GEMMS = {np.dtype(np.float32): ("cblas_sgemm", "float32"),
          np.dtype(np.float64): ("cblas_dgemm", "float64")}
_gemm_found: dict = {}


def gemm_source(dtype) -> str | None:
    """Source that declares `_gemm(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c,
    ldc)`, row-major, a, b, c arrays (or views: their first element is the matrix's), the
    CBLAS gemm of `dtype` (float32 / float64) of the BLAS library NumPy calls, for a
    generated module's kernels (after its `kernel`): they call it on buffers of their own,
    without the GIL, on any thread. It takes arrays, not pointers, so that an array the
    kernel made stays alive until the library is done with it (numba frees an array after
    its last use, and a pointer taken from it is not one: a convolution block's columns,
    made in the parallel loop, were freed before the product read them). The symbol is
    bound by name (mirax_cblas_sgemm / _dgemm), so a kernel compiled into the disk cache
    finds it in the next process too. None where the library has no CBLAS we can reach."""
    name, ty = _GEMMS[np.dtype(dtype)]
    if name not in _gemm_found:
        found = blas.cblas(name)
        if found is not None:
            import llvmlite.binding   # numba's own dependency (loops run only with numba)
            llvmlite.binding.add_symbol(f"mirax_{name}", found[0])
        _gemm_found[name] = found
    if _gemm_found[name] is None:
        return None
    it = "int64" if _gemm_found[name][1] else "int32"
    # (order, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
    args = ["intc"] * 3 + [it] * 3 + [ty, "voidptr", it, "voidptr", it, ty, "voidptr", it]
    return (f"\n\n_cblas_gemm = _nb.types.ExternalFunction('mirax_{name}', _nb.types.void(" +
            ", ".join(f"_nb.types.{a}" for a in args) + "))\n" + _GEMM_ARRAYS)


# row-major 101; transa / transb: no transpose 111, transpose 112
_GEMM_ARRAYS = """

@_nb.njit(cache=__CACHE__, nogil=True)
def _gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
    _cblas_gemm(101, ta, tb, m, n, k, alpha, a.ctypes.data, lda, b.ctypes.data, ldb, beta,
                c.ctypes.data, ldc)
"""


# the parts' wrapper of a `kernel(a, b, c, s, e)` over three arrays, to end its source
PARTS_OF_3 = """


@_parts
def kernel_parts(a, b, c, starts, stops, p0, p1):
    for p in _nb.prange(p0, p1):
        kernel(a, b, c, starts[p], stops[p])
    return 0
"""


def run_parts(src: str, args, starts, stops, threads: int, on_native: bool | None = None,
              fn: str = "kernel_parts") -> int:
    """`src`'s function `fn` over the parts [starts[p], stops[p]) on up to `threads`
    threads: in one call on numba's native threads where they are ready (`on_native`,
    default native.ready()), else a run of parts a thread on the pool (threads.py). One
    part runs on the calling thread, compiled without parallel=True (numba's parallel
    compile costs several times the plain one). Returns the sum of the parts' results."""
    n = len(starts)
    t = min(threads, n)
    if n > 1 and (native.ready() if on_native is None else on_native):
        native.threads(t)
        return compiled_parts(src, True, fn)(*args, starts, stops, 0, n)
    kernel = compiled_parts(src, False, fn)
    if t <= 1:
        return kernel(*args, starts, stops, 0, n)
    runs = parts(n, -(-n // t))
    return sum(pool.map(lambda i: kernel(*args, starts, stops, *runs[i]), len(runs)))


def run_gemm_parts(src: str, args, starts, stops, threads: int,
                   fn: str = "kernel_parts") -> int:
    """run_parts for modules whose parts call `_gemm` (gemm_source), with one BLAS thread
    while they run: a plan holds one already, but an eager call keeps the user's count,
    and each part's call would then start the library's own threads too."""
    prev = blas.enter()
    try:
        return run_parts(src, args, starts, stops, threads, fn=fn)
    finally:
        blas.exit(prev)


def compile_single(node):
    """A kernel for one big elementwise node (not fused: no neighbour to fuse with) as a
    compiled loop of one op, or None. Arithmetic, comparisons, select and converts only
    (IEEE ops: NumPy's values bit for bit; NumPy's transcendental functions stay), and
    only where its parts run on native threads: in one call, where the pool's NumPy call
    a part (parallel.elementwise) takes the GIL twice a part and the parts queue for it
    on many cores (W6 at 16 cores: a [100000, 64] by [100000, 1] multiply 2.8 ms on the
    pool)."""
    out = node.outputs[0].aval
    # at least two parts on native threads, as compile_fusion would cut it (checked before
    # compiling: most single ops are too small to take)
    moved = math.prod(out.shape) * sum(np.dtype(v.aval.dtype).itemsize
                                       for v in (*node.inputs, *node.outputs))
    if not native.ready() or len(node.outputs) != 1 or moved < 2 * cheap_bytes(True) or \
            node.prim.name in _F32_OPS or len(set(node.inputs)) != len(node.inputs) or \
            not eligible([node], min_ops=1):
        return None
    sub = Graph(node.prim.name)
    sub.inputs, sub.nodes, sub.outputs = list(node.inputs), [node], list(node.outputs)
    run = compile_fusion(Node(fusion_p, sub.inputs, {"graph": sub, "name": node.prim.name},
                              sub.outputs, node.source))
    return None if run is None else (lambda *xs: run(*xs)[0])


def compile_fusion(node):
    """The kernel of one eligible fusion node (allocates the outputs and runs the loop), or
    None where numba fails to compile it."""
    sub = node.params["graph"]
    members, ins, outs = sub.nodes, list(sub.inputs), list(sub.outputs)
    lay = layout(members, externals(members))
    src = source(members, ins, outs, lay)
    if debug_level() >= 3:
        print(f"# --- compiled CPU loop {node.params['name']} ---\n{src}", file=sys.stderr)
    L, R = (1, lay.L) if lay.flat else (lay.L, lay.R)   # flat: one row, the inner loop
    by_cols = L == 1   # split by columns
    fn = "cols_parts" if by_cols else "rows_parts"
    red = {o for o, kind in lay.reds.items() if kind == "lead"}   # (R,) sums
    view = {"full": (L, R), "lead": (R,), "trail": (L,), "one": (1,)}
    in_shapes = [view[lay.ins[v]] for v in ins]
    out_specs = [(view[lay.reds.get(o, "full")], np.dtype(o.aval.dtype), tuple(o.aval.shape))
                 for o in outs]
    partial = [o in red and not by_cols for o in outs]   # summed per part, then in order
    # Parts (rows, contiguous; one-row groups: columns). Leading-axis sums take parts of
    # a fixed size (the same at every thread count and either engine), summed per part
    # and the parts' sums added in part order. (Column parts would keep each sum's order,
    # but numba's loop over strided columns ran 10x slower.) Elementwise groups spread
    # their parts evenly over the call's threads (any split gives the same values), each
    # big enough to outlast its hand-off.
    extent = R if by_cols else L
    grain = max(16, -(-PART // (L if by_cols else R)))
    if by_cols:
        grain = -(-grain // 16) * 16    # whole vectors of columns per part
    fixed = parts(extent, grain)
    even = not red
    heavy = any(m.prim.name in _F32_OPS for m in members)
    moved = sum(np.dtype(v.aval.dtype).itemsize for v in ins if lay.ins[v] == "full") \
        + sum(d.itemsize for s, d, _ in out_specs if len(s) == 2)

    def most(on_native: bool) -> int:
        """The most parts an elementwise group is cut into."""
        if heavy:
            return L * R // heavy_part(on_native)
        return L * R * moved // cheap_bytes(on_native)

    def split(threads: int, on_native: bool):
        """The parts' bounds on `threads` threads."""
        if not even:
            return bounds(fixed)
        g = -(-extent // max(1, min(threads, most(on_native))))
        return bounds(parts(extent, -(-g // 16) * 16 if by_cols else g))
    splits: dict = {}   # (threads, on native threads) -> split
    # one part at any thread count: the loop compiled without parallel=True (numba's
    # parallel compile took 0.7 s a kernel against 0.2: the VAE's first epoch with a
    # cold cache took 27 s when every fusion compiled it, 16 s with this rule, 15 s on
    # the pool)
    one = len(fixed) == 1 if not even else most(True) <= 1

    try:   # compile now, on empty arrays of the call's types (the loop body never runs)
        compiled_parts(src, native.ready() and not one, fn)(
            0, 0, *(np.empty((0,) * len(s), np.dtype(v.aval.dtype))
                    for v, s in zip(ins, in_shapes)),
            *(np.empty((0,) * (len(s) + p), d) for (s, d, _), p in zip(out_specs, partial)),
            np.empty(0, np.int64), np.empty(0, np.int64), 0, 0)
    except Exception as e:   # a numba failure is ours, not the user's: run it otherwise
        print(f"[mirax] compiled loop {node.params['name']} failed ({type(e).__name__}); "
              f"running it as NumPy calls", file=sys.stderr)
        return None

    def run(*bufs):
        xs = [np.ascontiguousarray(b).reshape(s) for b, s in zip(bufs, in_shapes)]
        ys = [np.empty(s, d) for s, d, _ in out_specs]
        # (one part: no knob read on the small loops' hot path)
        key = (1, False) if one else (n_threads(), native.ready())
        ps = splits.get(key) or splits.setdefault(key, split(*key))
        sums = [np.empty((len(ps[0]), R), y.dtype) if p else y for y, p in zip(ys, partial)]
        if run_parts(src, (L, R, *xs, *sums), *ps, *key, fn):
            # a sin / cos argument beyond vecmath.SIN_LIMIT: all again with libm's
            run_parts(exact_source(src), (L, R, *xs, *sums), *ps, *key, fn)
        for y, part_sums, p in zip(ys, sums, partial):
            if p:
                y[...] = summed(part_sums)
        return [y.reshape(shape) for y, (_, _, shape) in zip(ys, out_specs)]
    return run
