"""CUDA graphs: a static plan's kernel sequence captured once and replayed with one launch.

Where it sits: runtime.lower wraps each top-level plan in `Replay`. The plan runs as usual
for its first calls (kernels compile, nested plans lower, CuPy's and cuBLAS's lazy setup
happen). Then, when the plan is worth it (`MIRAX_CUDA_GRAPHS`: 1 always, 0 never, unset:
when measured calls show that a replay, copies included, beats a plain call), it is
captured on a side stream into buffers of a private CuPy memory pool, and every later call
is the graph's launch and one kernel copying its static outputs into fresh buffers (so no
caller ever holds a buffer that the next replay overwrites). A graph reads its big inputs
(IN_PLACE bytes and more) where the caller's buffers are: it is captured for those
addresses and replayed when a call's big inputs are at them again; small inputs are copied
into static buffers first (one small kernel). A training loop's state comes back at two
sets of addresses, taking turns: a step's big outputs come from the plan's own pool, each
in a block of a size of its own, so each takes the block that the same output of the last
call but one freed (CuPy's pool hands out blocks of one size in no fixed order: parameters
and moments of one shape swapped addresses from step to step). So a plan keeps up to
ADDRESSED such graphs; a call at other addresses, or with strided inputs, replays one more
graph whose inputs are all copied in. (The copies in took 36 us of the 0.214 ms of GPU
time of the MLP Adam step at batch 64 on an H200, its parameters and moments, 70 MB; read
in place, the step's kernels take 0.178 ms.) The graphs of a plan share its pool: they run
one after another on the stream, each one's outputs copied out before the next starts, so
they share its blocks too: a captured graph's static buffers go back to the pool, for the
next capture to take. In auto mode the first replays are a trial: each part timed (the
host's call; the graph and the copies with CUDA events), and the graph is kept only when a
call at the replay's pace, max(host, graph + copies), beats the plain one's, max(host,
GPU), by KEEP; else it is dropped and the plan runs plain for good. (A plan of one
attention kernel on [8,1024,16,64] bf16 took 0.081 ms a call plain and 0.120 replayed,
when replays still copied their inputs in: its 0.083 ms of GPU work was as long as its
host time, and the copies of q, k, v and o added 0.037.)

The knob is read on a plan's calls until it is captured or ruled out: MIRAX_CUDA_GRAPHS=0
at a plan's first call keeps it plain for good. Measured on an H200 (benchmarks/gpu.py):
the MLP Adam step at batch 64 takes 0.196 ms captured (auto picks it) against 1.26 ms
plain (torch eager 1.46 ms, torch with the step in a CUDA graph 0.39 ms); at batch 8192
the step is GPU-bound: 1.21 ms (auto), 1.20 with graphs forced on, 1.27 off. A plan
calling cuBLAS through CuPy (which refuses during a capture) is ruled out at its first
capture; dot_general (every float and complex dtype and precision, 3xTF32's split kernel
included) and attention's cuBLAS path call cuBLAS through library.py's own ctypes handle
and workspace, which a capture takes. What still goes through CuPy: integer products
(cp.matmul) and cupy.linalg (cuSOLVER, whose info checks also sync with the host).

Invariant: a capture never sees host work. Plans that ran a host fallback (the backend's
`host_calls` moved during a call) or whose capture failed (a host sync inside, such as
cond's branch index) are never captured again and run as plain plans. The private pool
lives as long as the graph: its blocks are the addresses baked into the graph, and no
other allocation can be handed them. The callers' addresses baked into a graph are read
only by a replay whose inputs are at them (its key), so they hold that call's values.
"""
from __future__ import annotations

import threading
import time

import cupy as cp
import numpy as np

from mirax.backends.cuda.codegen import _debug
from mirax.core import config, profile_events


class _Flags(threading.local):
    depth = 0    # > 0 while a plan runs: nested plans (composite bodies, loops) never capture
    capturing = False  # True during a capture: errors there are the capture's, not an op's


flags = _Flags()  # per thread: another thread's plan may run or capture meanwhile
WARMUP = 1      # plain calls before a plan is measured or captured
MEASURED = 2    # auto mode: plain calls timed (the fastest counts: an early call can still
                # be slowed by the memory pool growing with cudaMalloc)
LAUNCH_BOUND = 0.5  # auto captures when host time > this x the call's GPU time, and
COPIES = 0.5    # the copies a replay adds take < this x the host time it saves
COPY_BW = 3.5e12  # bytes/s (read + write) of the copy-in / copy-out kernels, H200
KEEP = 0.9      # auto keeps a captured graph whose replays take < this x a plain call
ADDRESSED = 4   # graphs a plan captures at its callers' input addresses (then: copies in)
IN_PLACE = 1 << 16  # bytes: inputs this big are read in place, smaller ones copied in
stats = {"captured": 0, "replays": 0, "refused": 0, "dropped": 0}
failures: list = []  # why captures failed (a host sync inside, ...), newest last


def mode() -> str:
    """'1' (capture every capturable plan), '0' (never) or 'auto' (MIRAX_CUDA_GRAPHS)."""
    v = config.get("cuda_graphs")
    return {"1": "1", "on": "1", "0": "0", "off": "0"}.get(v, "auto")


class Replay:
    """callable(*bufs) -> list of buffers: `plan`, captured as a CUDA graph once it pays."""

    def __init__(self, be, plan, in_dtypes, name: str = "plan"):
        self.be, self.plan, self.in_dtypes, self.name = be, plan, in_dtypes, name
        self.calls = 0
        self.state = "warm"  # -> "measured" (auto) -> "trial" (auto) -> "graph" | "off"
        # input addresses (None: static inputs, copied in) -> _Captured
        self.captured: dict = {}
        self.pool = None        # the memory pool of the captured graphs' buffers
        self.out_pool = None    # ... and of the big outputs handed out (`_fresh`)
        self.measured = None    # auto mode: (host s, GPU s, copies s) of the fastest call
        self.replayed = None    # ... and (host s, graph s, copies s) of the fastest trial
        # held by a call while it warms, measures, captures or replays (the static buffers
        # and the state are this plan's own): calls from other threads wait their turn
        self.lock = threading.Lock()
        self.stream = None      # the stream of the last replay
        self.side = None        # the stream captures run on (the pool's blocks are per stream)
        self.profiled = None    # callable(bufs): the traced run (set by runtime.lower)

    def __call__(self, *bufs):
        bufs = [b if type(b) is cp.ndarray else cp.asarray(np.asarray(b, d))
                for b, d in zip(bufs, self.in_dtypes)]
        if profile_events.active is not None and self.profiled is not None and \
                not flags.depth:   # a profiler trace: the plan with CUDA events per node
            return self.profiled(bufs)
        if self.state == "off" or flags.depth:
            return self._plain(bufs)
        with self.lock:
            return self._call(bufs)

    def _call(self, bufs):
        if self.state == "off":
            return self._plain(bufs)
        if self.state == "graph":
            return self._replay(bufs)
        if self.state == "trial":
            return self._trial(bufs)
        knob = mode()
        if knob == "0":  # for good: a plan made while graphs are off stays plain
            self.state = "off"
            return self._plain(bufs)
        self.calls += 1
        if self.calls <= WARMUP:
            return self._checked(bufs)
        if self.state == "warm" and knob == "auto" and self.calls <= WARMUP + MEASURED:
            return self._measure(bufs)
        return self._capture(bufs)

    # --- plain runs ------------------------------------------------------------------------
    def _plain(self, bufs):
        flags.depth += 1
        try:
            return self.plan(*bufs)
        finally:
            flags.depth -= 1

    def _checked(self, bufs):
        """A plain run; a host fallback inside rules the plan out for good."""
        before = self.be.host_calls
        out = self._plain(bufs)
        if self.be.host_calls != before:
            self._refuse("a host fallback ran")
        return out

    def _measure(self, bufs):
        """A plain call timed on the host and on the GPU (CUDA events: elapsed time, which
        for a launch-bound plan is the host's pace). After MEASURED calls (the fastest of
        each counts) the plan is captured when a replay pays: the host is busy most of the
        call (launch-bound), and the copies a replay adds (its outputs out) cost
        well under the host time it saves. A plan of a few kernels over big arrays
        (softmax on 512 MiB: 0.03 ms of host, 0.3 ms to copy its output) stays plain."""
        stream = cp.cuda.get_current_stream()
        stream.synchronize()
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        t0 = time.perf_counter()
        out = self._checked(bufs)
        host = time.perf_counter() - t0
        end.record()
        end.synchronize()
        gpu = cp.cuda.get_elapsed_time(start, end) / 1e3
        copies = 2 * sum(b.nbytes for b in out) / COPY_BW
        self.measured = host, gpu, copies = _fastest((host, gpu, copies), self.measured)
        if self.state != "off" and self.calls == WARMUP + MEASURED:
            pays = host > LAUNCH_BOUND * gpu and copies < COPIES * host
            self.state = "measured" if pays else "off"
        return out

    def _off(self):
        """Plain from now on: the graphs and their memory let go."""
        self.state = "off"
        self.captured, self.pool, self.out_pool, self.side = {}, None, None, None

    def _refuse(self, why: str):
        self._off()
        stats["refused"] += 1
        failures.append(f"{self.name}: {why}")
        del failures[:-20]

    # --- capture and replay ----------------------------------------------------------------
    def _capture(self, bufs):
        """The first capture, then a trial (auto mode) or replays."""
        if self._captured(bufs) is None:
            return self._plain(bufs)
        if self.measured is None:   # captured because the knob says always
            self.state = "graph"
            return self._replay(bufs)
        self.state, self.calls = "trial", 0
        return self._trial(bufs)

    def _captured(self, bufs):
        """The graph for these inputs: the one captured where their big buffers are, else
        a new one there (up to ADDRESSED; contiguous buffers), else the one whose inputs
        are all copied in; None (and the plan plain for good) where a capture fails."""
        key = tuple(b.data.ptr for b in bufs if b.nbytes >= IN_PLACE) \
            if all(b.flags.c_contiguous for b in bufs) else None
        hit = self.captured.get(key)
        if hit is None and key is not None and \
                len(self.captured) - (None in self.captured) >= ADDRESSED:
            key, hit = None, self.captured.get(None)
        if hit is None:
            hit = self._record(bufs, key)
        return hit

    def _record(self, bufs, key):
        """Capture the plan on a side stream: reading the big `bufs` where they are (`key`:
        their addresses) and the others from static buffers that a copy kernel fills, or
        (key None) every input from static buffers."""
        cur = cp.cuda.get_current_stream()
        side = self.side = self.side or cp.cuda.Stream(non_blocking=True)
        side.wait_event(cur.record())
        if self.stream is not None:   # (another thread's last replay)
            side.wait_event(self.stream.record())
        self.pool = self.pool or cp.cuda.MemoryPool()
        copied = [i for i, b in enumerate(bufs) if key is None or b.nbytes < IN_PLACE]
        before = self.be.host_calls
        try:
            with cp.cuda.using_allocator(self.pool.malloc), side:
                ins = list(bufs)
                static_in = [cp.empty(bufs[i].shape, bufs[i].dtype) for i in copied]
                copy_in = Copies([bufs[i].nbytes for i in copied])
                copy_in([bufs[i] for i in copied], static_in)
                for i, b in zip(copied, static_in):
                    ins[i] = b
                # a plain run on the side stream first: kernels for this layout compile and
                # the pool caches the blocks the capture will take
                self._plain(ins)
                side.begin_capture()
                flags.capturing = True
                try:
                    outs = [_aligned(o) for o in self._plain(ins)]
                finally:
                    flags.capturing = False
                    graph = side.end_capture()
        except Exception as e:  # noqa: BLE001 - a host sync or an unsupported call inside
            cur.wait_event(side.record())
            self._refuse(f"capture failed: {type(e).__name__}: {str(e)[:200]}")
            return None
        cur.wait_event(side.record())
        self.stream = cur
        if self.be.host_calls != before:
            self._refuse("a host fallback ran during capture")
            return None
        copy_out = Copies([o.nbytes for o in outs])
        # an input read in place and passed out is read from the call's own buffer
        at = {(b.data.ptr, b.shape, b.dtype): i for i, b in enumerate(ins) if b is bufs[i]}
        outs = [at.get((o.data.ptr, o.shape, o.dtype), o) for o in outs]
        # the static buffers go back to the pool (their addresses stay in the graph): it
        # hands them only to this plan's later captures, whose graphs run one at a time and
        # use them only while they run, so the plan's graphs take about one graph's memory
        static_in = [_unowned(b, self.pool) for b in static_in]
        outs = [o if type(o) is int else _unowned(o, self.pool) for o in outs]
        hit = self.captured[key] = _Captured(graph, copied, static_in, copy_in, outs,
                                             copy_out)
        stats["captured"] += 1
        return hit

    def _trial(self, bufs):
        """A replay timed part by part (auto mode). After MEASURED of them (the fastest of
        each part counts) the graph stays if a replay's pace beats the plain call's."""
        stream = cp.cuda.get_current_stream()
        stream.synchronize()
        events = [cp.cuda.Event() for _ in range(4)]
        graphs = len(self.captured)
        t0 = time.perf_counter()
        outs = self._replay(bufs, events)
        host = time.perf_counter() - t0
        if len(self.captured) != graphs:   # a capture ran (new addresses): not the pace
            return outs
        events[3].synchronize()
        gpu = cp.cuda.get_elapsed_time(events[1], events[2]) / 1e3
        copies = (cp.cuda.get_elapsed_time(events[0], events[1])
                  + cp.cuda.get_elapsed_time(events[2], events[3])) / 1e3
        self.replayed = host, gpu, copies = _fastest((host, gpu, copies), self.replayed)
        self.calls += 1
        if self.calls == MEASURED:
            plain_host, plain_gpu, _ = self.measured
            plain = max(plain_host, min(plain_gpu, gpu))   # the GPU's work: the graph's
            replay = max(host, gpu + copies)
            if replay < KEEP * plain:
                self.state = "graph"
            else:   # the copies cost what the host saves: plain from now on
                self._off()
                stats["dropped"] += 1
        return outs

    def _replay(self, bufs, events=None):
        """(Copies in,) the graph, copies out; `events` (4 CUDA events, optional) are
        recorded around the three."""
        hit = self._captured(bufs)
        if hit is None:   # (a capture failed: refused, plain for good)
            return self._plain(bufs)
        cur = cp.cuda.get_current_stream()
        if self.stream is not None and self.stream.ptr != cur.ptr:
            # the last replay (another thread's stream) must be done with the static buffers
            cur.wait_event(self.stream.record())
        self.stream = cur
        _mark(events, 0)
        hit.copy_in([bufs[i] for i in hit.copied], hit.static_in)
        _mark(events, 1)
        hit.graph.launch()
        _mark(events, 2)
        srcs = [bufs[o] if type(o) is int else o for o in hit.outs]
        outs = self._fresh(srcs)
        hit.copy_out(srcs, outs)
        _mark(events, 3)
        stats["replays"] += 1
        return outs

    def _fresh(self, like):
        """Buffers for a replay's outputs. The big ones come from the plan's own pool, each
        output's block a size of its own (512 bytes more an output: CuPy's pool bins blocks
        by size), so that the block an output freed comes back to that output: a loop
        feeding a call's outputs to its next call but one gives the same addresses."""
        outs = []
        for i, o in enumerate(like):
            if o.nbytes < IN_PLACE:
                outs.append(cp.empty(o.shape, o.dtype))
                continue
            self.out_pool = self.out_pool or cp.cuda.MemoryPool()
            outs.append(cp.ndarray(o.shape, o.dtype, self.out_pool.malloc(o.nbytes + 512 * i)))
        return outs


class _Captured:
    """A captured graph: the inputs it reads from static buffers (`copied`: their
    indices, copied in by `copy_in`; the others it reads where the caller's buffers are),
    its outputs (static buffers, or the index of an input passed out) and their copy
    kernel."""

    def __init__(self, graph, copied, static_in, copy_in, outs, copy_out):
        self.graph, self.outs, self.copy_out = graph, outs, copy_out
        self.copied, self.static_in, self.copy_in = copied, static_in, copy_in


def _fastest(times, best):
    """The timings `times`, each part the fastest of it and of `best` (None at first)."""
    return times if best is None else tuple(min(a, b) for a, b in zip(times, best))


def _mark(events, i):
    if events:
        events[i].record()


def _unowned(a, owner):
    """An array over `a`'s buffer that does not hold it (`owner` is kept alive)."""
    mem = cp.cuda.UnownedMemory(a.data.ptr, a.nbytes, owner, a.device.id)
    return cp.ndarray(a.shape, a.dtype, cp.cuda.MemoryPointer(mem, 0))


def _aligned(o):
    """A captured output as a C-contiguous buffer at a 16-byte boundary (a copy, inside
    the capture, where it is a view)."""
    if o.flags.c_contiguous and o.data.ptr % 16 == 0:
        return o
    return cp.array(o, order="C", copy=True)


# --- one kernel copying many contiguous buffers ---------------------------------------------
_COPY_SRC = r"""
#define T 256
__device__ __forceinline__ void seg(const unsigned char* s, unsigned char* d, long long n,
                                    long long b, long long nb) {
  const long long n16 = n >> 4;
  const uint4* s4 = reinterpret_cast<const uint4*>(s);
  uint4* d4 = reinterpret_cast<uint4*>(d);
  for (long long i = b * T + threadIdx.x; i < n16; i += nb * T) d4[i] = s4[i];
  const int tail = (int)(n & 15);
  if (b == 0 && threadIdx.x < tail) d[(n16 << 4) + threadIdx.x] = s[(n16 << 4) + threadIdx.x];
}
"""
_SEGMENTS = 64  # buffers per kernel (two pointers each: well inside the 4 KB of parameters)
_MAX_BLOCKS = 1024  # per buffer; each thread copies 16 bytes per step of a grid-stride loop
_copy_kernels: dict = {}


class Copies:
    """callable(srcs, dsts): copy each contiguous src into its dst (`nbytes` each, fixed)
    with one kernel launch per 64 buffers; unaligned or strided sources are copied one by
    one (cp.copyto) after it."""

    def __init__(self, nbytes: list):
        self.nbytes = [int(n) for n in nbytes]
        self.chunks = []
        for lo in range(0, len(nbytes), _SEGMENTS):
            idx = [i for i in range(lo, min(lo + _SEGMENTS, len(nbytes))) if nbytes[i]]
            if idx:
                self.chunks.append((idx, *_copy_kernel(tuple(self.nbytes[i] for i in idx))))

    def __call__(self, srcs, dsts):
        odd = []
        for idx, kern, blocks in self.chunks:
            args = []
            for i in idx:
                s, d = srcs[i], dsts[i]
                if not (s.flags.c_contiguous and s.data.ptr % 16 == 0):
                    odd.append(i)
                    s = d  # copies itself (harmless); cp.copyto below writes the values
                args += (s, d)
            kern((blocks,), (256,), tuple(args))
        for i in odd:
            cp.copyto(dsts[i], srcs[i])


def _copy_kernel(sizes: tuple):
    hit = _copy_kernels.get(sizes)
    if hit is not None:
        return hit
    params, body, first = [], [], 0
    for k, n in enumerate(sizes):
        nb = int(min(max(1, -(-(n // 16) // (256 * 4))), _MAX_BLOCKS))
        params.append(f"const unsigned char* s{k}, unsigned char* d{k}")
        body.append(f"  if (b < {first + nb}) {{ seg(s{k}, d{k}, {n}LL, b - {first}, {nb}); "
                    f"return; }}")
        first += nb
    src = (_COPY_SRC + f'extern "C" __global__ void mirax_copies({", ".join(params)}) {{\n'
           "  const long long b = blockIdx.x;\n" + "\n".join(body) + "\n}\n")
    _debug("copies", "", src)
    hit = _copy_kernels.setdefault(sizes, (cp.RawKernel(src, "mirax_copies"), first))
    return hit
