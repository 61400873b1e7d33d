"""Fused attention on CUDA for the `dot_product_attention` composite and its backward
composite `dot_product_attention_bwd`.

Where it sits: the CUDA backend (`__init__.py`) claims both primitives with `impl` below;
CudaBackend.decomposes leaves them whole under jit. The kernels (attention_kernels.py) are CUDA C
compiled by NVRTC (cupy.RawModule), one module per (family, dtype, head dims), cached.

Layout: q [B,T,H,D], k [B,S,H,D], v [B,S,H,Dv] as the composite takes them (contiguous; no
transposes). `mask` (bool, True = attend) and `bias` come 4-d and broadcast to the scores
[B,H,T,S]: the kernels read them through strides (0 on broadcast axes). Every sum
accumulates in float32 (f16/bf16 round on store).

The forward's outputs are o and each query row's logsumexp (float32 [B,H,T]; the
attention primitive's second output, ops/nn.py); the backward takes both, so it never
recomputes the softmax statistics, and folds the logsumexp's cotangent into delta.

Three paths, one rule (`path`):
- "tc", f16/bf16, and float32 at precision "default" (TF32 operands, as dot_general's
  products there): flash attention on tensor cores (mma.sync, float32 accumulation; tiles
  streamed through two cp.async shared-memory stages, `tc_tiles`): the forward keeps no
  T x S matrix; in the backward one kernel writes dq (a block per query tile) and one dk,
  dv (a block per key tile), without atomics. P and dS round to the operand type (TF32
  for float32) before their products, as in FlashAttention-2. On an sm_90 device the
  f16/bf16 kernels with head dims that are multiples of 64 are the Hopper ones instead
  ("wg", attention_wg.py: the same tiles, softmax and roundings, their products warpgroup
  MMAs reading swizzled shared-memory tiles through descriptors; built for sm_90a by
  NVRTC directly, `hopper`, `wg_tiles`).
- "blas", exact float32 backward of large cases (T*S >= BLAS_MIN_SCORES): per batch and chunk of
  heads, the scores as cuBLAS strided-batched SGEMMs (exact float32 at the op's precision
  "highest" and "high"; TF32 tensor cores at "default", as dot_general) into a
  bounded buffer (BLAS_MAX_BYTES), a masked-softmax row kernel, dP by SGEMM, a row kernel
  for dS = P * (dP - delta), and dq, dk, dv by SGEMM (cuBLAS through library's ctypes
  handle, which a CUDA-graph capture can take).
- "simt", the rest of exact float32 ("high", "highest": the forward; small backwards):
  flash-attention-style kernels on CUDA cores, TPR threads per query row.
All paths share delta = rowsum(dO * O) - dlse (one kernel). A fully masked row has output
0, logsumexp +inf, and gradients 0. `force_path` (or MIRAX_CUDA_ATTN_PATH) overrides the
rule, for tests and benchmarks.

Speed (H200, q/k/v [8,1024,16,64] causal, CUDA events; benchmarks/gpu.py and
benchmarks/attention_tiles.py), bf16 kernels alone (the mma.sync ones beside): forward
0.064-0.067 ms (0.100), delta 0.026, dq 0.080-0.084 (0.124), dk/dv 0.127-0.131 (0.198);
torch SDPA's forward 0.065. At [2,4096,16,64]: forward 0.180-0.188, dq 0.206-0.210, dk/dv
0.355-0.370; at [2,4096,8,128] 0.140-0.143, 0.192-0.196 and 0.271-0.281; torch SDPA's
forward 0.187 and 0.162. The Hopper kernels were bound by issuing instructions, not by
their products (Nsight Compute on the forward at [2,4096,16,64]: issue slots 62% busy, the
integer ALU the busiest pipe at 59%, 574 instructions a warp for each 64 x 64 tile, 4
warps a scheduler). Two rounds of cuts (the thirteenth and fourteenth sessions; after the
first, the full-tile path counted 364-396 instructions in the SASS of the NVRTC cubin,
after the second 284-330, the higher figure with the output's rescale) took the times
above from 0.081 / 0.092 / 0.148 and 0.263 / 0.294 / 0.450 (d128: 0.210 /
0.273 / 0.348): descriptors made once and stepped by constants; each thread's cp.async
addresses made once, before the loop (`Stream`); no zeroed accumulators before a product
that writes them; the softmax scale folded into the exponent's FFMA; the running max
moved only when a row's grows past 2^8 (`softmax_step`: the output is rescaled rarely);
and whole tiles (no mask inside) with their own copy of the tile's softmax and products,
where one copy merging both paths had moved every score into other registers (32 moves a
thread a tile). dk/dv's elementwise loop (P^T, dS^T) had a branch in every element,
which serialized its exponentials: 0.14 of its 0.265 ms then. Host time: the kernels launch
through the driver with their arguments in blocks made once a signature (launch.py), the
launchers and non-address arguments are cached too: `forward` took 74 -> 42 us a call at
[1,64,1,64], a jitted forward at [8,1024,16,64] 102 -> 55 us (its kernel 64).
float32 at "default" ("tc", TF32): forward 0.21 ms, jit of value_and_grad 0.94 ms (torch
SDPA 0.65 / 2.24, JAX 2.54); exact float32 forward 1.23 ms ("simt"; "blas" 1.89),
backward 3.97 ms ("blas"; "simt" 4.15, each before the logsumexp output). The CUDA-core
backward takes about 3x its forward: 7 matrix products' worth of work against 2 (dq 3,
dk/dv 4), one score per thread with a warp shuffle per key. Left on the table: each
Hopper kernel waits for its score products before their softmax (or dS) and for the
next products after it, with 2-4 blocks a multiprocessor to fill the gaps (the forward at
[2,4096,16,64] spends about 710 cycles of a multiprocessor on a 64 x 64 tile, against
about 284 cycles of issue, 256 of exponentials and 256 of tensor-core products);
FlashAttention-3's producer warps with TMA loads and ping-ponging warpgroups are not
done, nor dq accumulated inside dk/dv (3 of the backward's 7 products recompute S and
dP for dq).

Not covered (these run the composite's body compiled for CUDA, counted as "decomposed"
in the dispatch report and by reason in `fallbacks`): float64, head dims over 128, and
(simt only) dims whose per-thread share would exceed 32 registers.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

import cupy as cp
import numpy as np
from cupy_backends.cuda.libs import nvrtc

from mirax.core import config
from mirax.backends.cuda import attention_kernels as kernels
from mirax.backends.cuda import library
from mirax.backends.cuda.launch import kernel
from mirax.backends.cuda.library import (
    COMPUTE_32F, COMPUTE_32F_FAST_TF32, CUDA_TYPE, GEMM_DEFAULT, LOW)
from mirax.core import dtypes
from mirax.backends.cuda.codegen import _debug
from mirax.backends.cuda.runtime import body_impl

NT = 128   # simt: threads per block
BK = 32    # simt: keys per shared-memory tile (forward, dq)
BQ = 32    # simt: queries per shared-memory tile (dk/dv)
MAX_D = 128
BLAS_MIN_SCORES = 1 << 18   # float32 backward: cuBLAS from T*S = 512 x 512 on (measured
#                             at 1024 x 1024: 3.97 ms against 4.15 on CUDA cores)
BLAS_MAX_BYTES = 256 << 20  # its float32 score buffer (one chunk of heads)

fallbacks: Counter = Counter()  # reason -> calls that ran the body instead of a kernel
force_path: str | None = None   # "simt", "tc" or "blas" instead of the rule
_modules: dict = {}
_launchers: dict = {}  # (family, dtype, head dims, device) -> launch

_DTYPE_CODE = {np.dtype(np.float32): 0, np.dtype(np.float16): 1, dtypes.bfloat16: 2}


# --- the rule ---------------------------------------------------------------------------------
def path(dtype, T: int, S: int, backward: bool, precision: str = "highest") -> str:
    """Tensor cores for f16/bf16, and for float32 at precision "default" (TF32); exact
    float32 on CUDA cores, except the backward of large cases through cuBLAS."""
    tensor_cores = np.dtype(dtype) in LOW or precision == "default"
    p = force_path or config.get("cuda_attn_path") or None
    if p is not None:
        return "simt" if p == "tc" and not tensor_cores else p
    if tensor_cores:
        return "tc"
    return "blas" if backward and T * S >= BLAS_MIN_SCORES else "simt"


def _pad(n: int, m: int) -> int:
    return -(-n // m) * m


def geometry(d: int, dv: int):
    """simt: threads per row (1, 2 or 4) for head dims padded to multiples of 4, or None:
    the smallest TPR whose per-thread share is at most 32 values and divides into float4s."""
    d, dv = _pad(d, 4), _pad(dv, 4)
    if max(d, dv) > MAX_D or min(d, dv) == 0:
        return None
    least = config.get("cuda_attn_tpr")
    for tpr in (t for t in (1, 2, 4) if t >= least):
        if d % (4 * tpr) == 0 and dv % (4 * tpr) == 0 and max(d, dv) // tpr <= 32:
            return tpr
    return None


def supported(q, k, v, backward: bool = False, precision: str = "highest") -> str | None:
    """None when a kernel path covers these operands, else the reason it does not."""
    if np.dtype(q.dtype) not in _DTYPE_CODE:
        return f"dtype {dtypes.short_name(q.dtype)}"
    d, dv = q.shape[3], v.shape[3]
    p = path(q.dtype, q.shape[1], k.shape[1], backward, precision)
    if max(d, dv) > MAX_D or min(d, dv) == 0 or (p == "simt" and geometry(d, dv) is None):
        return f"head dims {d}, {dv}"
    if q.shape[0] > 65535 or q.shape[2] > 65535:  # blockIdx.z = batch, blockIdx.y = head
        return f"grid: B={q.shape[0]}, H={q.shape[2]} (at most 65535 each)"
    return None


# --- compilation ------------------------------------------------------------------------------
def module(kind: str, dtype, **defines):
    """The compiled module of one kernel family (attention_kernels.source), cached."""
    key = (kind, np.dtype(dtype), tuple(sorted(defines.items())))
    mod = _modules.get(key)
    if mod is None:
        src = kernels.source(kind, _DTYPE_CODE[np.dtype(dtype)], **defines)
        _debug("attention", f"mx_attn ({kind})", src)
        mod = _modules.setdefault(key, _sm90a_module(src) if kind == "wg" else
                                  cp.RawModule(code=src, options=("-std=c++14",)))
    return mod


def _sm90a_module(src: str):
    """A module built for sm_90a, the target of Hopper's own instructions (wgmma), which
    RawModule's compiler does not name (it adds the device's plain sm_90): NVRTC straight to
    a cubin, with the options RawModule gives the other families, kept in the cache
    directory by the hash of source and compiler (a temporary one where that is not
    writable), and loaded by RawModule."""
    opts = ("-std=c++14", "-arch=sm_90a", "-ftz=true")
    key = hashlib.sha256(repr((src, opts, nvrtc.getVersion())).encode()).hexdigest()[:20]
    root = Path(config.get("cache_dir")) / "cuda"
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError:
        root = Path(tempfile.mkdtemp(prefix="mirax_cuda_"))
    path = root / f"attn_wg_{key}.cubin"
    if not path.exists():
        prog = nvrtc.createProgram(src, "mx_attn_wg.cu", (), ())
        try:
            try:
                nvrtc.compileProgram(prog, opts)
            except nvrtc.NVRTCError as e:
                raise RuntimeError(f"mx_attn (wg): {e}\n{nvrtc.getProgramLog(prog)}") from None
            cubin = nvrtc.getCUBIN(prog)
        finally:
            nvrtc.destroyProgram(prog)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(cubin)
        os.replace(tmp, path)
    return cp.RawModule(path=str(path))


_hopper: dict = {}  # device id -> compute capability 9.0?


def hopper(c) -> bool:
    """Do the Hopper kernels (wgmma) run this call: an sm_90 device, f16/bf16, head dims
    multiples of 64 (config cuda_attn_wgmma turns them off)."""
    if not (config.get("cuda_attn_wgmma") and c.dtype in LOW and c.D % 64 == 0
            and c.DV % 64 == 0):
        return False
    dev = cp.cuda.Device()
    if dev.id not in _hopper:
        _hopper[dev.id] = dev.compute_capability == "90"
    return _hopper[dev.id]


def _ptr(x) -> np.uint64:
    return np.uint64(0 if x is None else x.data.ptr)


def _contig(x):
    if not x.flags.c_contiguous:
        x = cp.ascontiguousarray(x)
    if x.data.ptr % 16:
        x = x.copy()
    return x


def _padded(x, n):
    """x [..., d] zero-padded to [..., n] (contiguous, 16-byte aligned)."""
    if x.shape[-1] == n:
        return _contig(x)
    out = cp.zeros(x.shape[:-1] + (n,), x.dtype)
    out[..., :x.shape[-1]] = x
    return out


def _bstrides(x):
    """Element strides of a contiguous 4-d array, 0 on axes of size 1 (broadcast)."""
    return tuple(0 if n == 1 else s // x.itemsize for n, s in zip(x.shape, x.strides))


@functools.lru_cache(maxsize=256)
def _scalars(ms, bs, wl, wr, flags, T, S, H, scale):
    """A call's kernel arguments that are not addresses, as the kernels' C types (made once
    a signature: thirteen NumPy scalars a call took 4-5 us)."""
    return ((*map(np.int64, ms), *map(np.int64, bs), np.int32(wl), np.int32(wr),
             np.int32(flags)), (np.int32(T), np.int32(S), np.int32(H)), np.float32(scale))


class _Call:
    """One call's operands (padded for its path) and the launch arguments its kernels share."""

    def __init__(self, q, k, v, mask, bias, scale, is_causal, window, backward,
                 precision="highest"):
        self.B, self.T, self.H, self.D0 = q.shape
        self.S, self.DV0 = k.shape[1], v.shape[3]
        self.dtype = np.dtype(q.dtype)
        # the cuBLAS path's products: TF32 for float32 at "default", as the "tc" kernels
        # (the "simt" ones are exact float32)
        self.compute = (COMPUTE_32F_FAST_TF32 if precision == "default" and
                        self.dtype == np.dtype(np.float32) else COMPUTE_32F)
        self.path = path(self.dtype, self.T, self.S, backward, precision)
        mult = 16 if self.path == "tc" else 4
        self.D, self.DV = _pad(self.D0, mult), _pad(self.DV0, mult)
        self.q, self.k = _padded(q, self.D), _padded(k, self.D)
        self.v = _padded(v, self.DV)
        self.mask = None if mask is None else _contig(mask.astype(cp.bool_, copy=False))
        self.bias = None if bias is None else _contig(bias.astype(cp.float32, copy=False))
        ms = _bstrides(self.mask) if self.mask is not None else (0,) * 4
        bs = _bstrides(self.bias) if self.bias is not None else (0,) * 4
        wl = wr = 0
        if window is not None:
            lim = self.T + self.S + 1
            wl, wr = (max(-lim, min(lim, int(w))) for w in window)
        flags = (1 * bool(is_causal) + 2 * (window is not None) + 4 * (mask is not None)
                 + 8 * (bias is not None))
        # the kernels' EXTRA_PARAMS (the buffers' addresses, then the rest), T, S, H, scale
        tail, self.dims, self.scale = _scalars(ms, bs, wl, wr, flags, self.T, self.S, self.H,
                                               float(scale))
        self.extra = (_ptr(self.mask), _ptr(self.bias), *tail)

    def padded_out(self, x, n):
        return x if x.shape[-1] == n else cp.ascontiguousarray(x[..., :n])


# --- simt -------------------------------------------------------------------------------------
def _simt(c):
    tpr = geometry(c.D0, c.DV0)
    mod = module("simt", c.dtype, D=c.D, DV=c.DV, TPR=tpr, NT=NT, BK=BK, BQ=BQ)
    rows = NT // tpr
    return mod, (lambda n: (-(-n // rows), c.H, c.B))


def _simt_forward(c, o, lse):
    mod, grid = _simt(c)
    kernel(mod, "mx_attn_fwd")(
        grid(c.T), (NT,), (_ptr(c.q), _ptr(c.k), _ptr(c.v), _ptr(o), _ptr(lse), *c.extra,
                           *c.dims, c.scale))


def _simt_backward(c, do, lse, delta, dq, dk, dv, dbias):
    mod, grid = _simt(c)
    common = (_ptr(c.q), _ptr(c.k), _ptr(c.v), _ptr(do), _ptr(lse), _ptr(delta))
    kernel(mod, "mx_attn_dq")(
        grid(c.T), (NT,), (*common, _ptr(dq), *c.extra, *c.dims, c.scale))
    kernel(mod, "mx_attn_dkdv")(
        grid(c.S), (NT,), (*common, _ptr(dk), _ptr(dv), _ptr(dbias), *c.extra, *c.dims,
                           c.scale))


# --- tensor cores -----------------------------------------------------------------------------
def tc_tiles(d: int, dv: int, dtype) -> dict:
    """The tensor-core kernels' tile #defines for head dims d, dv (multiples of 16).

    Forward: NWF warps of 16 MTF query rows over K/V tiles of BNF keys; dq: NWD warps of
    16 rows over BND-key tiles; dk/dv: NWK warps of 16 keys over BMQ-query tiles. Chosen by
    timing variants on an H200 (`python benchmarks/attention_tiles.py`, [8,1024,16,64]
    causal, ms; benchmarks/results/attention_tiles_h200.json). bf16: blocks of 4 warps
    beat 8 (several blocks a multiprocessor keep the tensor cores busy while another block
    is at its barrier or its softmax): fwd 0.100 (8 warps 0.101; MTF 2 0.12: 251
    registers), dq 0.123 (8 warps 0.173), dk/dv with BMQ 16 0.274 (32: 0.289, 64: 0.378; 0.198
    since its elementwise loop lost its branches).
    float32 (TF32, fragments twice the registers, tiles twice the bytes): fwd with BNF 32
    0.195 (64: 0.225), dq with 8 warps over 32-key tiles 0.271 (4 warps, 64 keys: 0.324),
    dk/dv with BMQ 16 0.479 (32: 0.485).

    PAD pads shared-memory rows (elements): 16 bytes for 16-bit types makes ldmatrix
    conflict-free; float32 rows of 4 mod 32 words make both TF32 fragment reads so."""
    if np.dtype(dtype) == np.float32:
        return {"D": d, "DV": dv, "PAD": 4, "NWF": 4, "MTF": 1, "BNF": 32, "NWD": 8,
                "BND": 32, "NWK": 4, "BMQ": 16}
    return {"D": d, "DV": dv, "PAD": 8, "NWF": 4, "MTF": 1, "BNF": 64, "NWD": 4, "BND": 64,
            "NWK": 4, "BMQ": 16}


def _launcher(mod, kernels):
    """launch(c, name, rows, args) for a module's kernels: name -> (threads, rows (queries
    or keys) a block, shared-memory bytes)."""
    def launch(c, name, n_rows, args):
        threads, rows, smem = kernels[name]
        # x: (batch, head), fastest; y: the row tile, so that a causal launch starts every
        # head's longest tiles first
        kernel(mod, name, smem)((c.B * c.H, -(-n_rows // rows)), (threads,), args,
                                shared_mem=smem)
    return launch


def _cached_launcher(kind, c, make):
    """The launcher of family `kind` for c's dtype and head dims, make(c) once."""
    key = (kind, c.dtype, c.D, c.DV, cp.cuda.runtime.getDevice())
    launch = _launchers.get(key)
    if launch is None:
        launch = _launchers.setdefault(key, make(c))
    return launch


def tc_launcher(c):
    """The mma.sync kernels' launcher for c's dtype and head dims (tc_tiles)."""
    t = tc_tiles(c.D, c.DV, c.dtype)
    size = c.dtype.itemsize
    ldk, ldv = c.D + t["PAD"], c.DV + t["PAD"]   # shared-memory row strides (elements)
    bmf, bmd, bnk = 16 * t["MTF"] * t["NWF"], 16 * t["NWD"], 16 * t["NWK"]
    bnf, bnd, bmq = t["BNF"], t["BND"], t["BMQ"]
    # two stages of each streamed tile
    return _launcher(module("tc", c.dtype, **t), {
        "mx_tc_fwd": (32 * t["NWF"], bmf, size * (bmf * ldk + 2 * bnf * (ldk + ldv))),
        "mx_tc_dq": (32 * t["NWD"], bmd, size * (bmd + 2 * bnd) * (ldk + ldv)),
        "mx_tc_dkdv": (32 * t["NWK"], bnk,
                       size * (bnk + 2 * bmq) * (ldk + ldv) + 16 * bmq)})


def _tc(c):
    return _cached_launcher("tc", c, tc_launcher)


def wg_tiles(d: int, dv: int) -> dict:
    """The Hopper kernels' #defines (PAD: TC_COMMON's strides, unused by their tiles).

    Forward: blocks of NWG warpgroups of 64 query rows over K/V tiles of BNW keys, registers
    bounded for MINB blocks a multiprocessor; dq: DQ_NWG warpgroups of 64 query rows over
    DQ_BN-key tiles (DQ_MINB); dk/dv: DK_NWG warpgroups of 64 keys over DK_BM-query tiles
    (DK_MINB). Chosen by timing variants on an H200 (causal bf16, ms; the "tc" kernels beside;
    timed before the kernels' instruction cuts, see the module's note). Forward:
    [8,1024,16,64] 1 warpgroup of 64 keys, 4 blocks 0.083 (2 warpgroups
    0.089, tiles of 128 keys 0.11-0.12; tc 0.101); [2,4096,16,64] 0.262 (2 warpgroups 0.256;
    tc 0.337); [2,4096,8,128] 2 warpgroups 0.211 (1: 0.247, 128 keys 0.231; tc 0.316). Tiles
    of 128 keys take 180-230 registers (one block a multiprocessor) or spill. Issuing the
    next tile's Q K^T before this tile's softmax (FlashAttention-3's overlap within a
    warpgroup, three K/V stages) measured slower at every size: 230 registers; folding
    the scale into the exponent's FFMA did not pay alone (it went in later with the
    thirteenth session's other cuts); nor did loading K/V tiles two or three
    ahead through 3 or 4 stages alone ([2,4096,16,64]: 0.258-0.275 against 0.257-0.268;
    [2,4096,8,128] with 2 warpgroups 0.285-0.291 against 0.207). dq at [8,1024,16,64]: 1
    warpgroup over 64-key tiles, 2 blocks 0.093 (3 blocks 0.095-0.097, 32-key tiles
    0.105-0.107, 2 warpgroups 0.14); dk/dv: 1 warpgroup over 64-query tiles, 2 blocks 0.150
    (32-query tiles, 3 blocks 0.152; 16, 4 blocks 0.187; 2 warpgroups 0.174), at
    [2,4096,8,128] 0.347 (32-query tiles spill: 0.91). dk/dv takes 204 registers, dq 162.
    dq added inside dk/dv (dS through shared memory into dS K, float32 atomic reductions
    into a buffer) took the dk/dv kernel from 0.156 to 0.238 ms at [8,1024,16,64] and from
    0.46 to 0.78 at [2,4096,16,64], more than the dq kernel it spares (0.093, 0.30).
    dk/dv starting dV += P^T dO before computing dS^T (so that the product runs under it)
    took 0.370 against 0.355 ms at [2,4096,16,64] and 0.330 against 0.272 at
    [2,4096,8,128] (218 and 245 registers): not kept."""
    t = {"D": d, "DV": dv, "PAD": 8, "DQ_NWG": 1, "DQ_BN": 64, "DQ_MINB": 2, "DK_NWG": 1,
         "DK_BM": 64, "DK_MINB": 2}
    if max(d, dv) <= 64:
        return dict(t, NWG=1, BNW=64, MINB=4)
    return dict(t, NWG=2, BNW=64, MINB=2)


def wg_launcher(c):
    """The Hopper kernels' launcher for c's dtype and head dims (wg_tiles)."""
    t = wg_tiles(c.D, c.DV)
    size = c.dtype.itemsize
    bm, bn = 64 * t["NWG"], t["BNW"]
    qm, qn = 64 * t["DQ_NWG"], t["DQ_BN"]
    kn, km = 64 * t["DK_NWG"], t["DK_BM"]
    # swizzled tiles (+ 1 KB to align the first to 1024 bytes): the block's own rows and
    # two stages of the streamed ones; dk/dv's stages also hold their rows' lse and delta
    return _launcher(module("wg", c.dtype, **t), {
        "mx_wg_fwd": (128 * t["NWG"], bm,
                      size * (bm * c.D + 2 * bn * (c.D + c.DV)) + 1024),
        "mx_wg_dq": (128 * t["DQ_NWG"], qm, size * (qm + 2 * qn) * (c.D + c.DV) + 1024),
        "mx_wg_dkdv": (128 * t["DK_NWG"], kn,
                       size * (kn + 2 * km) * (c.D + c.DV) + 16 * km + 1024)})


def _wg(c):
    return _cached_launcher("wg", c, wg_launcher)


def _hopper_launch(c):
    """The Hopper kernels' launcher for this call, or None: not Hopper's case, or an NVRTC
    without sm_90a (said once; the mma.sync kernels run from then on)."""
    if not hopper(c):
        return None
    try:
        return _wg(c)
    except RuntimeError as e:
        _hopper[cp.cuda.Device().id] = False
        first = str(e).partition("\n")[0]
        print(f"[mirax] the Hopper attention kernels did not build ({first}); using the "
              "mma.sync ones", file=sys.stderr)
        return None


def _tc_forward(c, o, lse):
    args = (_ptr(c.q), _ptr(c.k), _ptr(c.v), _ptr(o), _ptr(lse), *c.extra, *c.dims, c.scale)
    wg = _hopper_launch(c)
    if wg is not None:
        wg(c, "mx_wg_fwd", c.T, args)
    else:
        _tc(c)(c, "mx_tc_fwd", c.T, args)


def _tc_backward(c, do, lse, delta, dq, dk, dv, dbias):
    wg = _hopper_launch(c)
    launch, kind = (_tc(c), "tc") if wg is None else (wg, "wg")
    common = (_ptr(c.q), _ptr(c.k), _ptr(c.v), _ptr(do), _ptr(lse), _ptr(delta))
    launch(c, f"mx_{kind}_dq", c.T, (*common, _ptr(dq), *c.extra, *c.dims, c.scale))
    launch(c, f"mx_{kind}_dkdv", c.S, (*common, _ptr(dk), _ptr(dv), _ptr(dbias), *c.extra,
                                       *c.dims, c.scale))


# --- cuBLAS + row kernels ---------------------------------------------------------------------
def _gemm(m, n, k, a, b, out, batch, alpha=1.0, compute=COMPUTE_32F):
    """Per batch i: row-major out_i[m, n] = op(a_i) @ op(b_i), float32 accumulation
    (`compute`: COMPUTE_32F_FAST_TF32 for float32 operands rounded to TF32).

    a, b: (pointer, cuda type, row stride, batch stride, transposed?), out: the same less the
    flag. Row-major C = A B is column-major C^T = B^T A^T: cuBLAS gets (b, a), each
    transposed exactly when it is used transposed. Through library's ctypes handle (its
    own workspace, set with the stream), so that a CUDA-graph capture can take it; CuPy's
    binding only where that handle could not be made."""
    (ap, at, lda, sa, ta), (bp, bt, ldb, sb, tb), (cp_, ct, ldc, sc) = a, b, out
    blas = library._get_blas()
    if blas is not None:
        al, be = ctypes.c_float(alpha), ctypes.c_float(0.0)
        library._check(blas.batched(blas.handle(), int(tb), int(ta), n, m, k, ctypes.byref(al),
                                    bp, bt, ldb, sb, ap, at, lda, sa, ctypes.byref(be), cp_,
                                    ct, ldc, sc, batch, compute, GEMM_DEFAULT),
                       "cublasGemmStridedBatchedEx")
        return
    from cupy_backends.cuda.libs import cublas
    handle = cp.cuda.device.get_cublas_handle()
    cublas.setStream(handle, cp.cuda.get_current_stream().ptr)
    al, be = np.array([alpha], np.float32), np.zeros(1, np.float32)
    cublas.gemmStridedBatchedEx(handle, int(tb), int(ta), n, m, k, al.ctypes.data,
                                bp, bt, ldb, sb, ap, at, lda, sa, be.ctypes.data,
                                cp_, ct, ldc, sc, batch, compute, GEMM_DEFAULT)


class _Blas:
    """The cuBLAS path of one call: per batch b and chunk of nh heads from h0, the scores
    [nh, T, S] in a float32 buffer, P (in place for float32) and, backward, dP / dS."""

    def __init__(self, c, backward):
        self.c = c
        self.aux = module("aux", c.dtype)
        T, S = c.T, c.S
        self.nh = max(1, min(c.H, BLAS_MAX_BYTES // (4 * T * S)))
        shape = (self.nh, T, S)
        self.sc = cp.empty(shape, cp.float32)
        half = c.dtype in LOW
        self.p = cp.empty(shape, c.dtype) if half else self.sc
        if backward:
            self.dp = cp.empty(shape, cp.float32)
            self.ds = cp.empty(shape, c.dtype) if half else self.dp
        self.t, self.f32 = CUDA_TYPE[c.dtype], CUDA_TYPE[np.dtype(np.float32)]

    def chunks(self):
        c = self.c
        for b in range(c.B):
            for h0 in range(0, c.H, self.nh):
                yield b, h0, min(self.nh, c.H - h0)

    def op(self, x, b, h0, n_rows, width, trans=False):
        """Operand (pointer, type, row stride, head stride, trans) of heads h0.. of batch b of
        a [B, n_rows, H, width] array."""
        c = self.c
        off = ((b * n_rows * c.H) + h0) * width * x.itemsize
        return (x.data.ptr + off, self.t, c.H * width, width, trans)

    def scores(self, x, trans=False, dtype=None):
        c = self.c
        t = self.t if dtype is None else dtype
        return (x.data.ptr, t, c.S, c.T * c.S, trans)

    def probs(self, b, h0, nh, lse=None):
        """P of the chunk: scores = q k^T by SGEMM, then the masked-softmax row kernel
        (which writes the rows' logsumexp into `lse` when given)."""
        c = self.c
        _gemm(c.T, c.S, c.D, self.op(c.q, b, h0, c.T, c.D), self.op(c.k, b, h0, c.S, c.D, True),
              self.scores(self.sc, dtype=self.f32)[:4], nh, compute=c.compute)
        self.aux.get_function("mx_rows_softmax")(
            (-(-nh * c.T // 4),), (128,), (_ptr(self.sc), _ptr(self.p), _ptr(lse), *c.extra,
                                          np.int32(b), np.int32(h0), np.int32(nh),
                                          np.int32(c.H), np.int32(c.T), np.int32(c.S),
                                          c.scale))


def _blas_forward(c, o, lse):
    run = _Blas(c, backward=False)
    for b, h0, nh in run.chunks():
        run.probs(b, h0, nh, lse)
        _gemm(c.T, c.DV, c.S, run.scores(run.p), run.op(c.v, b, h0, c.S, c.DV),
              run.op(o, b, h0, c.T, c.DV)[:4], nh, compute=c.compute)


def _blas_backward(c, do, lse, delta, dq, dk, dv, dbias):
    """(P is recomputed with the scores, which this path needs anyway: `lse` goes unused.)"""
    run = _Blas(c, backward=True)
    ds_fn = run.aux.get_function("mx_rows_ds")
    for b, h0, nh in run.chunks():
        run.probs(b, h0, nh)
        dob = run.op(do, b, h0, c.T, c.DV)
        _gemm(c.T, c.S, c.DV, dob, run.op(c.v, b, h0, c.S, c.DV, True),
              run.scores(run.dp, dtype=run.f32)[:4], nh, compute=c.compute)   # dP = dO v^T
        ds_fn((nh * c.T,), (256,), (_ptr(run.p), _ptr(run.dp), _ptr(delta), _ptr(run.ds),
                                    _ptr(dbias), np.int32(b), np.int32(h0), np.int32(nh),
                                    np.int32(c.T), np.int32(c.S), np.int32(c.H)))
        _gemm(c.S, c.DV, c.T, run.scores(run.p, True), dob,
              run.op(dv, b, h0, c.S, c.DV)[:4], nh, compute=c.compute)        # dv = P^T dO
        _gemm(c.T, c.D, c.S, run.scores(run.ds), run.op(c.k, b, h0, c.S, c.D),
              run.op(dq, b, h0, c.T, c.D)[:4], nh, alpha=float(c.scale),
              compute=c.compute)                                              # dq = dS k
        _gemm(c.S, c.D, c.T, run.scores(run.ds, True), run.op(c.q, b, h0, c.T, c.D),
              run.op(dk, b, h0, c.S, c.D)[:4], nh, alpha=float(c.scale),
              compute=c.compute)                                              # dk = dS^T q


# --- forward and backward ---------------------------------------------------------------------
_FORWARD = {"simt": _simt_forward, "tc": _tc_forward, "blas": _blas_forward}
_BACKWARD = {"simt": _simt_backward, "tc": _tc_backward, "blas": _blas_backward}


def forward(q, k, v, mask, bias, *, scale, is_causal, window, precision="highest"):
    """[o, lse]: the output and each query row's logsumexp, float32 [B, H, T]."""
    c = _Call(q, k, v, mask, bias, scale, is_causal, window, backward=False,
              precision=precision)
    o = cp.empty((c.B, c.T, c.H, c.DV), c.dtype)
    lse = cp.empty((c.B, c.H, c.T), cp.float32)
    if c.T and c.S:
        _FORWARD[c.path](c, o, lse)
    elif c.T:
        o[...] = 0
        lse[...] = np.inf
    return [c.padded_out(o, c.DV0), lse]


def _delta(c, ct, out, ct_lse):
    """rowsum(dO * O) - ct_lse as float32 [B, H, T]."""
    do, o = (_contig(x.astype(c.dtype, copy=False)) for x in (ct, out))
    dlse = _contig(ct_lse.astype(cp.float32, copy=False))
    delta = cp.empty((c.B, c.H, c.T), cp.float32)
    rows = c.B * c.T * c.H
    args = (_ptr(do), _ptr(o), _ptr(dlse), _ptr(delta), np.int32(rows), np.int32(c.T),
            np.int32(c.H), np.int32(c.DV0))
    aux = module("aux", c.dtype)
    if c.dtype in LOW and c.DV0 % 8 == 0:  # 16-byte loads, 8 lanes a row
        kernel(aux, "mx_attn_delta8")((-(-rows // 32),), (256,), args)
    else:
        kernel(aux, "mx_attn_delta")((-(-rows // 4),), (128,), args)
    return delta


def backward(ct, ct_lse, out, lse, q, k, v, mask, bias, *, scale, is_causal, window,
             precision="highest"):
    """[dq, dk, dv, dbias or None] from the cotangents of o and lse, and the forward's o and
    lse (which spares the backward recomputing the softmax statistics)."""
    c = _Call(q, k, v, mask, bias, scale, is_causal, window, backward=True,
              precision=precision)
    # the tensor-core kernels write every row of dq, dk, dv (the other paths may not)
    alloc = cp.empty if c.path == "tc" and c.T and c.S else cp.zeros
    dq = alloc((c.B, c.T, c.H, c.D), c.dtype)
    dk = alloc((c.B, c.S, c.H, c.D), c.dtype)
    dv = alloc((c.B, c.S, c.H, c.DV), c.dtype)
    dbias = None
    if bias is not None:
        dbias = cp.zeros((c.B, c.H, c.T, c.S), cp.float32)
    if c.T and c.S:
        ct = ct.astype(c.dtype, copy=False)   # (once: delta reads it too)
        lse = _contig(lse.astype(cp.float32, copy=False))
        _BACKWARD[c.path](c, _padded(ct, c.DV), lse, _delta(c, ct, out, ct_lse), dq, dk, dv,
                          dbias)
    dq, dk, dv = c.padded_out(dq, c.D0), c.padded_out(dk, c.D0), c.padded_out(dv, c.DV0)
    if dbias is not None:
        axes = tuple(i for i, n in enumerate(bias.shape) if n == 1)
        dbias = (dbias.sum(axis=axes, keepdims=True) if axes else dbias).astype(c.dtype)
    return [dq, dk, dv, dbias]


# --- the backend's impls ----------------------------------------------------------------------
def _split(args, has_mask, has_bias):
    q, k, v, rest = args[0], args[1], args[2], list(args[3:])
    mask = rest.pop(0) if has_mask else None
    bias = rest.pop(0) if has_bias else None
    return q, k, v, mask, bias


def impl(be, prim):
    """The CUDA impl of `dot_product_attention` or `dot_product_attention_bwd`: the kernels,
    or the composite's body compiled for CUDA where they do not apply (counted)."""
    body = body_impl(prim)
    name = prim.name
    is_bwd = name.endswith("_bwd")

    def fallback(reason, bufs, params):
        fallbacks[reason] += 1
        be.report[(name, "decomposed")] += 1
        return body(*bufs, **params)

    def run(*bufs, **params):
        opts = {k: params[k] for k in ("scale", "is_causal", "window")}
        opts["precision"] = params.get("precision", "highest")
        if is_bwd:
            nout = params["nout"]
            cts, outs, primals = bufs[:nout], bufs[nout:2 * nout], bufs[2 * nout:]
        else:
            primals = bufs
        q, k, v, mask, bias = _split(primals, params["has_mask"], params["has_bias"])
        reason = supported(q, k, v, is_bwd, opts["precision"])
        if reason is not None:
            return fallback(reason, bufs, params)
        if not is_bwd:
            return forward(q, k, v, mask, bias, **opts)
        dq, dk, dv, dbias = backward(*cts, *outs, q, k, v, mask, bias, **opts)
        grads = {0: dq, 1: dk, 2: dv}
        if bias is not None:
            grads[3 + params["has_mask"]] = dbias
        return [grads[i] for i in params["wrt"]]
    return run
