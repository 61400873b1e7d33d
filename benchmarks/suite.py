"""The benchmark suite: the issue's workloads, mirax against JAX, PyTorch and HIPS autograd,
in one run.

    python benchmarks/suite.py [--rounds 5] [--only W1,W4] [--torch-compile] [--no-eager]
                               [--no-torch] [--threads N] [--profile]

--profile times nothing: it prints each mirax jit case's top plan nodes (mx.profiler).
--threads N runs every framework on N cores (0: all the process may use; default 1: one
thread on one pinned core): the process is pinned to N cores and the thread pools of
mirax (cpu_threads), BLAS, XLA and PyTorch are sized to them.

Workloads (same data and initial weights for every framework; a correctness cross-check
against JAX before timing; medians of interleaved rounds after warm-up):
  W1  MLP 784-512-512-10 training step (relu, softmax cross-entropy, Adam written inline),
      batch 256
  W2  per-example gradients of a 64-128-10 tanh MLP at batch 128 (vmap of grad)
  W3  Hessian-vector product of a ~200k-parameter 3-layer tanh MLP loss, batch 64
  W4  third derivative of sum(sin(x) * x^3), x of 100,000 (steady state; first call too)
  W5  one pre-LN causal transformer block (d 256, 4 heads, MLP 1024, tanh-gelu), batch 8,
      sequence 128: loss mean(out^2), value and grad of all block parameters
  W6  a GAT-like layer (one head; index_select, segment_softmax, index_add) on 10,000
      nodes, 100,000 edges, 64 features: loss mean(out^2), value and grad of its weights
  W7  jacfwd and jacrev of a 256->256 tanh MLP
  W8  eager per-op overhead (the 200-op chain of benchmarks/overhead.py)
  W9  first call (trace, compile, run) of jit(grad) of a 6-layer W5 model; once each

Peers: JAX jit (the reference of every ratio), PyTorch eager, torch.compile with
--torch-compile (skipped where it fails; its compile takes minutes on a small CPU), and
HIPS autograd (optional; skipped when not installed) on W1-W5 and W7, written as its
users would: W2 loops grad over the 128 examples (autograd has no vmap), W3 is its
make_hvp (reverse over reverse), W7's jacrev is autograd.jacobian and its jacfwd stacks
256 forward-mode make_jvp calls (autograd has no jacfwd). autograd is absent from W6
(it has no index_add / segment ops: np.add.at is not differentiable in autograd), from
W8 (benchmarks/overhead.py's peers) and from W9 (it compiles nothing, so has no first call).
Results: benchmarks/results/suite.json and suite.md (and suite.png when matplotlib is
installed) for one thread, suite_<N>t.json / .md for N threads, and scaling.md, the
per-core scaling over every thread count with results (`--scaling` rebuilds it alone).
Ratios are time / JAX jit time: below 1 means faster than JAX.
"""
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import blas_info, blas_line, interleave, markdown_table, threads_from_argv, \
    torch_threads  # noqa

# the thread count is fixed before NumPy, JAX and PyTorch load (they read it at import)
THREADS = threads_from_argv(1)

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(HERE.parent))
import mirax as mx  # noqa: E402
import mirax.numpy as mnp  # noqa: E402

try:
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", False)
except ImportError:  # the suite needs JAX as its reference
    jax = jnp = None
try:   # (--no-torch: not even imported; its OpenMP threads spin after each call)
    if "--no-torch" in sys.argv[1:]:
        raise ImportError
    import torch
    torch_threads(THREADS)
except ImportError:
    torch = None
try:
    import autograd
    import autograd.numpy as anp
except ImportError:  # optional peer
    autograd = anp = None

RNG = np.random.default_rng(0)


class TorchNS:
    """The few NumPy-style functions the workloads use, spelled for PyTorch."""
    tanh, sin, exp, log, sqrt = (staticmethod(getattr(torch, n)) if torch else None
                                 for n in ("tanh", "sin", "exp", "log", "sqrt"))

    @staticmethod
    def maximum(x, c):
        return torch.clamp_min(x, c)

    @staticmethod
    def max(x, axis, keepdims=False):
        return torch.amax(x, dim=axis, keepdim=keepdims)

    @staticmethod
    def sum(x, axis=None, keepdims=False):
        return torch.sum(x) if axis is None else torch.sum(x, dim=axis, keepdim=keepdims)

    @staticmethod
    def mean(x):
        return torch.mean(x)


tns = TorchNS()


def init_mlp(sizes, scale=1.0):
    params = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        params.append((RNG.normal(0, scale / np.sqrt(a), (a, b)).astype(np.float32),
                       np.zeros(b, np.float32)))
    return params


def as_numpy(out) -> list:
    """Flatten any framework's nested output into a list of float64 NumPy arrays."""
    if isinstance(out, dict):
        return [a for k in sorted(out) for a in as_numpy(out[k])]
    if isinstance(out, (list, tuple)):
        return [a for o in out for a in as_numpy(o)]
    if torch is not None and isinstance(out, torch.Tensor):
        return [out.detach().numpy().astype(np.float64)]
    return [np.asarray(out, dtype=np.float64)]


def sync(out):
    """Wait for asynchronous (JAX) results."""
    if jax is not None:
        jax.block_until_ready(out)
    return out


def _tree(ns, params, fn):
    return [(fn(w), fn(b)) for w, b in params]


# --- W1: MLP training step with inline Adam -------------------------------------------------
def w1(args):
    B, sizes = 256, [784, 512, 512, 10]
    params = init_mlp(sizes)
    x = RNG.normal(size=(B, 784)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[RNG.integers(0, 10, B)]
    lr, b1, b2, eps = 1e-3, 0.9, 0.999, 1e-8

    def loss(ns, params, x, y):
        h = x
        for i, (w, b) in enumerate(params):
            h = h @ w + b
            if i < len(params) - 1:
                h = ns.maximum(h, 0.0)
        m = ns.max(h, axis=1, keepdims=True)
        z = h - m
        lse = ns.log(ns.sum(ns.exp(z), axis=1, keepdims=True))
        return -ns.mean(ns.sum(y * (z - lse), axis=1))

    def adam(ns, p, g, m, v):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * (g * g)
        return p - lr * (m / (1 - b1)) / (ns.sqrt(v / (1 - b2)) + eps), m, v

    def step_with(ns, value_and_grad, tree_map):
        def step(params, m, v, x, y):
            l, g = value_and_grad(lambda p: loss(ns, p, x, y))(params)
            new = tree_map(lambda *t: adam(ns, *t), params, g, m, v)
            is_t = (lambda t: isinstance(t, tuple) and len(t) == 3
                    and not isinstance(t[0], tuple))
            pick = [tree_map(lambda t, i=i: t[i], new, is_leaf=is_t) for i in range(3)]
            return l, pick[0], pick[1], pick[2]
        return step

    zeros = [(np.zeros_like(w), np.zeros_like(b)) for w, b in params]
    cases = {}
    mstep = step_with(mnp, mx.value_and_grad, mx.tree.map)
    mp, mz, mxx, myy = (mx.tree.map(mx.asarray, params), mx.tree.map(mx.asarray, zeros),
                        mx.asarray(x), mx.asarray(y))
    jit_step = mx.jit(mstep)
    cases["mirax jit"] = lambda: jit_step(mp, mz, mz, mxx, myy)
    if args.eager:
        cases["mirax eager"] = lambda: mstep(mp, mz, mz, mxx, myy)
    if jax is not None:
        jstep = jax.jit(step_with(jnp, jax.value_and_grad, jax.tree_util.tree_map))
        jp, jz = jax.tree_util.tree_map(jnp.asarray, (params, zeros))
        jxx, jyy = jnp.asarray(x), jnp.asarray(y)
        cases["jax jit"] = lambda: sync(jstep(jp, jz, jz, jxx, jyy))
    if torch is not None:
        tp = [(torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True))
              for w, b in params]
        tz = [(torch.zeros_like(w), torch.zeros_like(b)) for w, b in tp]
        tx, ty = torch.tensor(x), torch.tensor(y)

        def tstep(params, m, v, x, y):
            l = loss(tns, params, x, y)
            flat = [t for pair in params for t in pair]
            gs = torch.autograd.grad(l, flat)
            with torch.no_grad():
                fm = [t for pair in m for t in pair]
                fv = [t for pair in v for t in pair]
                res = [adam(tns, p, g, a, b) for p, g, a, b in zip(flat, gs, fm, fv)]
            pair = (lambda i: [(res[2 * k][i], res[2 * k + 1][i]) for k in range(len(params))])
            return l, pair(0), pair(1), pair(2)
        cases["torch eager"] = lambda: tstep(tp, tz, tz, tx, ty)
        if args.torch_compile:
            cases.update(_torch_compiled("torch.compile", tstep, (tp, tz, tz, tx, ty)))
    if autograd is not None:  # mx.tree.map only walks the lists of NumPy arrays here
        astep = step_with(anp, autograd.value_and_grad, mx.tree.map)
        cases["autograd"] = lambda: astep(params, zeros, zeros, x, y)
    return cases


def _torch_compiled(name, fn, args):
    try:
        c = torch.compile(fn)
        c(*args)
        return {name: lambda: c(*args)}
    except Exception as e:  # inductor needs a C++ toolchain; skip when it fails
        print(f"  ({name} skipped: {type(e).__name__})")
        return {}


# --- W2: per-example gradients (vmap of grad) ------------------------------------------------
def w2(args):
    B, sizes = 128, [64, 128, 10]
    params = init_mlp(sizes)
    x = RNG.normal(size=(B, 64)).astype(np.float32)
    y = RNG.normal(size=(B, 10)).astype(np.float32)

    def loss(ns, params, x, y):
        (w1, b1), (w2, b2) = params
        h = ns.tanh(x @ w1 + b1)
        d = h @ w2 + b2 - y
        return ns.sum(d * d)

    cases = {}
    mgrad = mx.vmap(mx.grad(lambda p, x, y: loss(mnp, p, x, y)), in_axes=(None, 0, 0))
    mj = mx.jit(mgrad)
    mp, mxx, myy = mx.tree.map(mx.asarray, params), mx.asarray(x), mx.asarray(y)
    cases["mirax jit"] = lambda: mj(mp, mxx, myy)
    if args.eager:
        cases["mirax eager"] = lambda: mgrad(mp, mxx, myy)
    if jax is not None:
        jg = jax.jit(jax.vmap(jax.grad(lambda p, x, y: loss(jnp, p, x, y)), in_axes=(None, 0, 0)))
        jp, jxx, jyy = jax.tree_util.tree_map(jnp.asarray, params), jnp.asarray(x), jnp.asarray(y)
        cases["jax jit"] = lambda: sync(jg(jp, jxx, jyy))
    if torch is not None:
        from torch.func import grad, vmap
        tg = vmap(grad(lambda p, x, y: loss(tns, p, x, y)), in_dims=(None, 0, 0))
        tp = [(torch.tensor(w), torch.tensor(b)) for w, b in params]
        tx, ty = torch.tensor(x), torch.tensor(y)
        cases["torch eager"] = lambda: tg(tp, tx, ty)
    if autograd is not None:
        ag = autograd.grad(lambda p, x, y: loss(anp, p, x, y))

        def aper_example(p, x, y):  # autograd has no vmap: one grad call per example
            gs = [ag(p, x[i], y[i]) for i in range(len(x))]
            return mx.tree.map(lambda *t: np.stack(t), *gs)
        cases["autograd"] = lambda: aper_example(params, x, y)
    return cases


# --- W3: Hessian-vector product ---------------------------------------------------------------
def w3(args):
    B, sizes = 64, [256, 384, 256, 10]
    params = init_mlp(sizes)
    vec = [(RNG.normal(size=w.shape).astype(np.float32), RNG.normal(size=b.shape).astype(
        np.float32)) for w, b in params]
    x = RNG.normal(size=(B, 256)).astype(np.float32)
    y = RNG.normal(size=(B, 10)).astype(np.float32)

    def loss(ns, params, x, y):
        h = x
        for i, (w, b) in enumerate(params):
            h = h @ w + b
            if i < len(params) - 1:
                h = ns.tanh(h)
        d = h - y
        return ns.mean(d * d)

    cases = {}
    mx_x, mx_y = mx.asarray(x), mx.asarray(y)
    mhvp = (lambda p, v: mx.hvp(lambda q: loss(mnp, q, mx_x, mx_y), (p,), (v,))[0])
    mj = mx.jit(mhvp)
    mp, mv = mx.tree.map(mx.asarray, params), mx.tree.map(mx.asarray, vec)
    cases["mirax jit"] = lambda: mj(mp, mv)
    if args.eager:
        cases["mirax eager"] = lambda: mhvp(mp, mv)
    if jax is not None:
        jx_, jy_ = jnp.asarray(x), jnp.asarray(y)
        jf = jax.jit(lambda p, v: jax.jvp(jax.grad(lambda q: loss(jnp, q, jx_, jy_)),
                                          (p,), (v,))[1])
        jp, jv = jax.tree_util.tree_map(jnp.asarray, (params, vec))
        cases["jax jit"] = lambda: sync(jf(jp, jv))
    if torch is not None:
        from torch.func import grad, jvp
        tx, ty = torch.tensor(x), torch.tensor(y)
        tp = [(torch.tensor(w), torch.tensor(b)) for w, b in params]
        tv = [(torch.tensor(w), torch.tensor(b)) for w, b in vec]
        cases["torch eager"] = lambda: jvp(grad(lambda q: loss(tns, q, tx, ty)),
                                           (tp,), (tv,))[1]
    if autograd is not None:  # make_hvp: the vjp of grad (reverse over reverse)
        from autograd.differential_operators import make_hvp
        cases["autograd"] = lambda: make_hvp(lambda q: loss(anp, q, x, y))(params)[0](vec)
    return cases


# --- W4: third derivative ---------------------------------------------------------------------
def w4(args):
    x = RNG.uniform(-2, 2, 100_000).astype(np.float32)

    def third(ns, grad):
        def f(x):
            return ns.sum(ns.sin(x) * x ** 3)
        d1 = grad(f)
        d2 = grad(lambda x: ns.sum(d1(x)))
        return grad(lambda x: ns.sum(d2(x)))

    cases = {}
    m3 = third(mnp, mx.grad)
    mxx = mx.asarray(x)
    t0 = time.perf_counter()
    mj = mx.jit(m3)
    np.asarray(mj(mxx))
    first = {"mirax jit": time.perf_counter() - t0}
    cases["mirax jit"] = lambda: mj(mxx)
    if args.eager:
        cases["mirax eager"] = lambda: m3(mxx)
    if jax is not None:
        jxx = jnp.asarray(x)
        t0 = time.perf_counter()
        jf = jax.jit(third(jnp, jax.grad))
        sync(jf(jxx))
        first["jax jit"] = time.perf_counter() - t0
        cases["jax jit"] = lambda: sync(jf(jxx))
    if torch is not None:
        tx = torch.tensor(x)

        def t3(x):
            x = x.detach().requires_grad_(True)
            g = x
            f = torch.sum(torch.sin(x) * x ** 3)
            for _ in range(3):
                (g,) = torch.autograd.grad(f, x, create_graph=True)
                f = g.sum()
            return g
        cases["torch eager"] = lambda: t3(tx)
    if autograd is not None:
        a3 = third(anp, autograd.grad)
        cases["autograd"] = lambda: a3(x)
    w4.first_call = first
    return cases


# --- W7: Jacobians ----------------------------------------------------------------------------
def w7(args):
    params = init_mlp([256, 256, 256])
    x = RNG.normal(size=256).astype(np.float32)

    def net(ns, params, x):
        for w, b in params:
            x = ns.tanh(x @ w + b)
        return x

    cases = {}
    mp, mxx = mx.tree.map(mx.asarray, params), mx.asarray(x)
    for kind in ("jacfwd", "jacrev"):
        mf = getattr(mx, kind)(lambda x, p=mp: net(mnp, p, x))
        mj = mx.jit(mf)
        cases[f"{kind}: mirax jit"] = (lambda mj=mj: mj(mxx))
        if args.eager:
            cases[f"{kind}: mirax eager"] = (lambda mf=mf: mf(mxx))
        if jax is not None:
            jp, jxx = jax.tree_util.tree_map(jnp.asarray, params), jnp.asarray(x)
            jf = jax.jit(getattr(jax, kind)(lambda x, p=jp: net(jnp, p, x)))
            cases[f"{kind}: jax jit"] = (lambda jf=jf: sync(jf(jxx)))
        if torch is not None:
            import torch.func as tf
            tp = [(torch.tensor(w), torch.tensor(b)) for w, b in params]
            tx = torch.tensor(x)
            tfn = getattr(tf, kind)(lambda x, p=tp: net(tns, p, x))
            cases[f"{kind}: torch eager"] = (lambda tfn=tfn: tfn(tx))
        if autograd is not None:
            ajac = autograd.jacobian if kind == "jacrev" else _autograd_jacfwd
            afn = ajac(lambda x, p=params: net(anp, p, x))
            cases[f"{kind}: autograd"] = (lambda afn=afn: afn(x))
    return cases


def _autograd_jacfwd(f):
    """The Jacobian of f from a 1-D x in autograd's forward mode: it has make_jvp but no
    jacfwd, so one JVP per input basis vector, stacked as columns."""
    from autograd.differential_operators import make_jvp

    def jac(x):
        jvp = make_jvp(f)(x)
        return np.stack([jvp(e)[1] for e in np.eye(x.size, dtype=x.dtype)], axis=-1)
    return jac


# --- W5 / W9: pre-LN transformer block ---------------------------------------------------------
D_MODEL, HEADS, D_MLP, BATCH, SEQ = 256, 4, 1024, 8, 128


class _MiraxNN:
    reshape = staticmethod(lambda x, s: mnp.reshape(x, s))
    mean = staticmethod(lambda x: mnp.mean(x))
    take = staticmethod(lambda x, i: mx.nn.index_select(x, i))
    leaky_relu = staticmethod(lambda x: mx.nn.leaky_relu(x, 0.2))
    index_add = staticmethod(lambda x, i, n: mx.nn.index_add(x, i, n))
    segment_softmax = staticmethod(lambda x, i, n: mx.nn.segment_softmax(x, i, n))

    @staticmethod
    def ln(x, w, b):
        return mx.nn.layer_norm(x, w, b, eps=1e-5)

    @staticmethod
    def attn(q, k, v):
        return mx.nn.dot_product_attention(q, k, v, is_causal=True)

    @staticmethod
    def gelu(x):
        return mx.nn.gelu(x, approximate=True)


class _JaxNN:
    reshape = staticmethod(lambda x, s: jnp.reshape(x, s))
    mean = staticmethod(lambda x: jnp.mean(x))
    take = staticmethod(lambda x, i: jnp.take(x, i, axis=0))
    leaky_relu = staticmethod(lambda x: jax.nn.leaky_relu(x, 0.2))
    index_add = staticmethod(lambda x, i, n: jax.ops.segment_sum(x, i, n))

    @staticmethod
    def segment_softmax(x, i, n):
        m = jax.lax.stop_gradient(jax.ops.segment_max(x, i, n))
        m = jnp.where(jnp.isfinite(m), m, 0.0)
        e = jnp.exp(x - m[i])
        return e / jax.ops.segment_sum(e, i, n)[i]

    @staticmethod
    def ln(x, w, b):
        mu = jnp.mean(x, -1, keepdims=True)
        var = jnp.mean(jnp.square(x - mu), -1, keepdims=True)
        return (x - mu) * jax.lax.rsqrt(var + 1e-5) * w + b

    @staticmethod
    def attn(q, k, v):
        return jax.nn.dot_product_attention(q, k, v, is_causal=True)

    @staticmethod
    def gelu(x):
        return jax.nn.gelu(x, approximate=True)


class _TorchNN:
    reshape = staticmethod(lambda x, s: torch.reshape(x, s))
    mean = staticmethod(lambda x: torch.mean(x))
    take = staticmethod(lambda x, i: torch.index_select(x, 0, i))
    leaky_relu = staticmethod(lambda x: torch.nn.functional.leaky_relu(x, 0.2))

    @staticmethod
    def index_add(x, i, n):
        return torch.zeros((n,) + tuple(x.shape[1:]), dtype=x.dtype).index_add_(0, i, x)

    @staticmethod
    def segment_softmax(x, i, n):
        with torch.no_grad():
            m = torch.full((n,), -torch.inf).scatter_reduce(0, i, x, "amax")
            m = torch.where(torch.isfinite(m), m, 0.0)
        e = torch.exp(x - m[i])
        return e / torch.zeros(n).index_add_(0, i, e)[i]

    @staticmethod
    def ln(x, w, b):
        return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5)

    @staticmethod
    def attn(q, k, v):
        o = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        return o.transpose(1, 2)

    @staticmethod
    def gelu(x):
        return torch.nn.functional.gelu(x, approximate="tanh")


class _AutogradNN:
    """The block in autograd.numpy, which has no attention, layer norm or gelu: written out
    (matmul + masked softmax; mean and variance; the tanh form). Python-float constants
    keep everything float32."""
    reshape = staticmethod(lambda x, s: anp.reshape(x, s))
    mean = staticmethod(lambda x: anp.mean(x))

    @staticmethod
    def ln(x, w, b):
        mu = anp.mean(x, -1, keepdims=True)
        var = anp.mean((x - mu) ** 2, -1, keepdims=True)
        return (x - mu) / anp.sqrt(var + 1e-5) * w + b

    @staticmethod
    def attn(q, k, v):
        q, k, v = (anp.transpose(t, (0, 2, 1, 3)) for t in (q, k, v))  # [B,H,T,Dh]
        T, dh = q.shape[2], q.shape[3]
        s = (q @ anp.swapaxes(k, -1, -2)) * float(dh ** -0.5)
        s = anp.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
        e = anp.exp(s - anp.max(s, -1, keepdims=True))
        o = (e / anp.sum(e, -1, keepdims=True)) @ v
        return anp.transpose(o, (0, 2, 1, 3))

    @staticmethod
    def gelu(x):
        return 0.5 * x * (1.0 + anp.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)))


def init_block():
    d, f = D_MODEL, D_MLP

    def w(a, b):
        return RNG.normal(0, 1 / np.sqrt(a), (a, b)).astype(np.float32)

    def z(n):
        return np.zeros(n, np.float32)
    return {"ln1_w": np.ones(d, np.float32), "ln1_b": z(d), "ln2_w": np.ones(d, np.float32),
            "ln2_b": z(d), "wq": w(d, d), "bq": z(d), "wk": w(d, d), "bk": z(d),
            "wv": w(d, d), "bv": z(d), "wo": w(d, d), "bo": z(d), "w1": w(d, f), "b1": z(f),
            "w2": w(f, d), "b2": z(d)}


def block(F, p, x):
    """One pre-LN causal transformer block on x [B,T,D]."""
    B, T, D = x.shape
    H = HEADS
    h = F.ln(x, p["ln1_w"], p["ln1_b"])
    q, k, v = (F.reshape(h @ p["w" + n] + p["b" + n], (B, T, H, D // H)) for n in "qkv")
    x = x + F.reshape(F.attn(q, k, v), (B, T, D)) @ p["wo"] + p["bo"]
    h = F.ln(x, p["ln2_w"], p["ln2_b"])
    return x + F.gelu(h @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]


def model_loss(F, layers, x):
    for p in layers:
        x = block(F, p, x)
    return F.mean(x * x)


def _torch_params(tree):
    return [{k: torch.tensor(v, requires_grad=True) for k, v in p.items()} for p in tree]


def _torch_grad(loss_fn, layers, *args):
    l = loss_fn(layers, *args)
    keys = [(i, k) for i, p in enumerate(layers) for k in sorted(p)]
    gs = torch.autograd.grad(l, [layers[i][k] for i, k in keys])
    out = [{} for _ in layers]
    for (i, k), g in zip(keys, gs):
        out[i][k] = g
    return l, out


def w5(args):
    layers = [init_block()]
    x = RNG.normal(size=(BATCH, SEQ, D_MODEL)).astype(np.float32)
    cases = {}
    mvg = mx.value_and_grad(lambda p, x: model_loss(_MiraxNN, p, x))
    mjit = mx.jit(mvg)
    mp, mxx = mx.tree.map(mx.asarray, layers), mx.asarray(x)
    cases["mirax jit"] = lambda: mjit(mp, mxx)
    if args.eager:
        cases["mirax eager"] = lambda: mvg(mp, mxx)
    if jax is not None:
        jf = jax.jit(jax.value_and_grad(lambda p, x: model_loss(_JaxNN, p, x)))
        jp, jxx = jax.tree_util.tree_map(jnp.asarray, layers), jnp.asarray(x)
        cases["jax jit"] = lambda: sync(jf(jp, jxx))
    if torch is not None:
        tp, tx = _torch_params(layers), torch.tensor(x)

        def tf(p, x):
            return _torch_grad(lambda p, x: model_loss(_TorchNN, p, x), p, x)
        cases["torch eager"] = lambda: tf(tp, tx)
        if args.torch_compile:
            cases.update(_torch_compiled("torch.compile", tf, (tp, tx)))
    if autograd is not None:
        avg = autograd.value_and_grad(lambda p, x: model_loss(_AutogradNN, p, x))
        cases["autograd"] = lambda: avg(layers, x)
    return cases


# --- W6: GAT-like graph layer -------------------------------------------------------------------
N_NODES, N_EDGES, N_FEAT = 10_000, 100_000, 64


def gat_loss(F, p, x, src, dst):
    """One attention head: scores from both ends, softmax over each node's in-edges,
    messages h[src] * alpha summed into dst."""
    h = x @ p["w"]
    a_s, a_d = h @ p["a_src"], h @ p["a_dst"]
    e = F.leaky_relu(F.take(a_s, src) + F.take(a_d, dst))
    alpha = F.segment_softmax(e, dst, N_NODES)
    msg = F.take(h, src) * F.reshape(alpha, (N_EDGES, 1))
    out = F.index_add(msg, dst, N_NODES)
    return F.mean(out * out)


def w6(args):
    x = RNG.normal(size=(N_NODES, N_FEAT)).astype(np.float32)
    src = RNG.integers(0, N_NODES, N_EDGES).astype(np.int32)
    dst = RNG.integers(0, N_NODES, N_EDGES).astype(np.int32)
    p = {"w": RNG.normal(0, 1 / 8, (N_FEAT, N_FEAT)).astype(np.float32),
         "a_src": RNG.normal(0, 1 / 8, N_FEAT).astype(np.float32),
         "a_dst": RNG.normal(0, 1 / 8, N_FEAT).astype(np.float32)}
    cases = {}
    mvg = mx.value_and_grad(lambda p, x, s, d: gat_loss(_MiraxNN, p, x, s, d))
    mjit = mx.jit(mvg)
    margs = (mx.tree.map(mx.asarray, p), mx.asarray(x), mx.asarray(src), mx.asarray(dst))
    cases["mirax jit"] = lambda: mjit(*margs)
    if args.eager:
        cases["mirax eager"] = lambda: mvg(*margs)
    if jax is not None:
        jf = jax.jit(jax.value_and_grad(lambda p, x, s, d: gat_loss(_JaxNN, p, x, s, d)))
        jargs = jax.tree_util.tree_map(jnp.asarray, (p, x, src, dst))
        cases["jax jit"] = lambda: sync(jf(*jargs))
    if torch is not None:
        tp = {k: torch.tensor(v, requires_grad=True) for k, v in p.items()}
        tx, ts, td = torch.tensor(x), torch.tensor(src, dtype=torch.long), torch.tensor(
            dst, dtype=torch.long)

        def tf(p, x, s, d):
            l = gat_loss(_TorchNN, p, x, s, d)
            gs = torch.autograd.grad(l, [p[k] for k in sorted(p)])
            return l, dict(zip(sorted(p), gs))
        cases["torch eager"] = lambda: tf(tp, tx, ts, td)
    return cases


# --- W9: first call (trace + compile + run) of jit(grad) of a 6-layer W5 model -----------------
def w9(args):
    layers = [init_block() for _ in range(6)]
    x = RNG.normal(size=(BATCH, SEQ, D_MODEL)).astype(np.float32)
    first, outs = {}, {}
    mp, mxx = mx.tree.map(mx.asarray, layers), mx.asarray(x)
    t0 = time.perf_counter()
    mf = mx.jit(mx.grad(lambda p, x: model_loss(_MiraxNN, p, x)))
    outs["mirax jit"] = as_numpy(mf(mp, mxx))
    first["mirax jit"] = time.perf_counter() - t0
    if jax is not None:
        jp, jxx = jax.tree_util.tree_map(jnp.asarray, layers), jnp.asarray(x)
        t0 = time.perf_counter()
        jf = jax.jit(jax.grad(lambda p, x: model_loss(_JaxNN, p, x)))
        outs["jax jit"] = as_numpy(sync(jf(jp, jxx)))
        first["jax jit"] = time.perf_counter() - t0
    if torch is not None and args.torch_compile:
        tp, tx = _torch_params(layers), torch.tensor(x)
        try:
            t0 = time.perf_counter()
            tf = torch.compile(lambda p, x: _torch_grad(
                lambda p, x: model_loss(_TorchNN, p, x), p, x)[1])
            outs["torch.compile"] = as_numpy(tf(tp, tx))
            first["torch.compile"] = time.perf_counter() - t0
        except Exception as e:  # inductor needs a C++ toolchain; skip when it fails
            print(f"  (torch.compile skipped: {type(e).__name__})")
    check({k: (lambda o=o: o) for k, o in outs.items()}, "W9")
    return first


WORKLOADS = {"W1": ("MLP train step + Adam, batch 256", w1),
             "W2": ("per-example grads (vmap of grad)", w2),
             "W3": ("hvp, 200k-param tanh MLP", w3),
             "W4": ("3rd derivative, x of 100k", w4),
             "W5": ("pre-LN transformer block fwd+bwd, B8 T128 d256", w5),
             "W6": ("GAT layer fwd+bwd, 10k nodes 100k edges 64 feat", w6),
             "W7": ("jacfwd / jacrev, 256->256 MLP", w7)}


def check(cases, label):
    """Every case against the JAX one (per Jacobian kind for W7)."""
    outs = {name: as_numpy(fn()) for name, fn in cases.items()}
    for name, out in outs.items():
        prefix = name.split(": ")[0] + ": " if ": " in name else ""
        ref = outs.get(prefix + "jax jit")
        if ref is None:
            continue
        for a, b in zip(out, ref):
            scale = max(1.0, float(np.max(np.abs(b)))) if b.size else 1.0
            if a.shape != b.shape or not np.allclose(a, b, rtol=2e-3, atol=2e-3 * scale):
                raise AssertionError(f"{label}: {name} disagrees with JAX "
                                     f"(max abs diff {np.max(np.abs(a - b)):.3g})")


def run(args):
    results = []
    for wid, (title, build) in WORKLOADS.items():
        if args.only and wid not in args.only:
            continue
        print(f"{wid}: {title}", flush=True)
        cases = build(args)
        check(cases, wid)
        if args.profile:
            profile(cases, wid)
            continue
        times = interleave(cases, rounds=args.rounds, number=1, warmup=2)
        for name, t in times.items():
            prefix = name.split(": ")[0] + ": " if ": " in name else ""
            ref = times.get(prefix + "jax jit")
            row = {"workload": wid, "title": title, "case": name, "ms": 1e3 * t,
                   "vs_jax_jit": t / ref if ref else None}
            results.append(row)
            print(f"  {name:<24} {1e3 * t:10.3f} ms" +
                  (f"   {t / ref:6.2f}x JAX jit" if ref else ""), flush=True)
        if wid == "W4":
            for name, t in w4.first_call.items():
                results.append({"workload": wid, "title": title + " (first call)",
                                "case": name + " (first call)", "ms": 1e3 * t,
                                "vs_jax_jit": t / w4.first_call.get("jax jit", t)})
                print(f"  {name + ' (first call)':<24} {1e3 * t:10.1f} ms")
    if not args.only or "W8" in args.only:
        results += w8(args)
    if not args.only or "W9" in args.only:
        print("W9: first call of jit(grad) of a 6-layer W5 model", flush=True)
        first = w9(args)
        for name, t in first.items():
            ref = first.get("jax jit")
            results.append({"workload": "W9", "title": "first call, jit(grad) 6 layers",
                            "case": name + " (first call)", "ms": 1e3 * t,
                            "vs_jax_jit": t / ref if ref else None})
            print(f"  {name + ' (first call)':<24} {1e3 * t:10.1f} ms" +
                  (f"   {t / ref:6.2f}x JAX jit" if ref else ""), flush=True)
    return results


def profile(cases, wid, calls: int = 5):
    """The mirax jit cases of one workload under mx.profiler after warm-up: the top plan
    nodes by time over `calls` calls, and how much of the wall time the nodes cover."""
    for name, fn in cases.items():
        if "mirax jit" not in name:
            continue
        fn(), fn()
        with mx.profiler.trace():   # (a plan's timed variant compiles at its first traced call)
            fn()
        t0 = time.perf_counter()
        with mx.profiler.trace():
            for _ in range(calls):
                fn()
        wall = (time.perf_counter() - t0) / calls
        print(f"  {name}: {1e3 * wall:.3f} ms a call under the profiler; top nodes over "
              f"{calls} calls:")
        mx.profiler.summary(top=12)


def w8(args):
    import overhead
    print("W8: eager per-op overhead (200-op chain on f32[16])", flush=True)
    cases, xs, ys = overhead.frameworks()
    overhead.check(cases, xs, ys)
    t = interleave(cases, rounds=args.rounds, number=3)
    rows = []
    ref = t.get("jax eager")
    for name, v in t.items():
        us = 1e6 * v / overhead.N_OPS
        rows.append({"workload": "W8", "title": "eager per-op overhead", "case": name,
                     "ms": 1e3 * v / overhead.N_OPS, "us_per_op": us,
                     "vs_jax_jit": None, "vs_jax_eager": v / ref if ref else None})
        print(f"  {name:<24} {us:8.2f} µs/op" +
              (f"   {v / ref:6.2f}x JAX eager" if ref else ""), flush=True)
    return rows


def save(results, args):
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    meta = {"python": platform.python_version(), "numpy": np.__version__,
            "jax": getattr(jax, "__version__", None),
            "torch": getattr(torch, "__version__", None), "rounds": args.rounds,
            "machine": platform.machine(), "processor": platform.processor(),
            "threads": THREADS, "blas": blas_info()}
    stem = "suite" if THREADS == 1 else f"suite_{THREADS}t"
    if args.only:   # a partial run: merged into the saved results of the other workloads
        old = out / f"{stem}.json"
        if old.exists():
            kept = [r for r in json.loads(old.read_text())["results"]
                    if r["workload"] not in args.only]
            results = kept + results
            results.sort(key=lambda r: int(r["workload"][1:]))
    (out / f"{stem}.json").write_text(json.dumps({"meta": meta, "results": results},
                                                 indent=1))
    rows = []
    for r in results:
        ratio = r.get("vs_jax_eager") if r["workload"] == "W8" else r.get("vs_jax_jit")
        unit = f"{r['us_per_op']:.2f} µs/op" if "us_per_op" in r else f"{r['ms']:.3f} ms"
        rows.append([r["workload"], r["case"], unit, f"{ratio:.2f}" if ratio else "-"])
    where = "One thread, one pinned CPU" if THREADS == 1 else \
        f"{THREADS} threads on {THREADS} pinned CPUs (every framework)"
    kernel = blas_line(meta["blas"])
    md = (f"# mirax benchmark suite\n\n{where}; medians of "
          f"{args.rounds} interleaved rounds after warm-up. Ratio: time / JAX jit (W8: / "
          "JAX eager); below 1 is faster than JAX." + (f" BLAS: {kernel}." if kernel else "")
          + "\n\n" + markdown_table(["workload", "case", "time", "ratio vs JAX"], rows) + "\n")
    (out / f"{stem}.md").write_text(md)
    write_scaling(out)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        timed = [r for r in results if r.get("vs_jax_jit") and "first call" not in r["case"]]
        fig, ax = plt.subplots(figsize=(10, 0.3 * len(timed) + 1))
        ax.barh([f"{r['workload']} {r['case']}" for r in timed],
                [r["vs_jax_jit"] for r in timed])
        ax.axvline(1.0, color="k", lw=0.8)
        ax.set_xscale("log")
        ax.set_xlabel("time / JAX jit (log)")
        fig.tight_layout()
        fig.savefig(out / f"{stem}.png", dpi=100)
    except ImportError:
        pass
    print(f"\nwrote {out / stem}.json, .md and {out / 'scaling.md'}")


def write_scaling(out):
    """scaling.md: per case, the time at every thread count with results, its ratio to JAX
    jit at the same count, and the speedup over one thread of the same framework."""
    runs = {}
    for f in sorted(out.glob("suite*.json")):
        doc = json.loads(f.read_text())
        runs[doc["meta"].get("threads", 1)] = {(r["workload"], r["case"]): r
                                               for r in doc["results"]}
    counts = sorted(runs)
    keys = list(dict.fromkeys(k for n in counts for k in runs[n]))
    header = ["workload", "case"] + [f"{n} thr: ms (vs JAX)" for n in counts] + \
        [f"speedup 1->{n}" for n in counts if n != 1]
    rows = []
    for k in keys:
        if "first call" in k[1]:
            continue
        row = list(k)
        for n in counts:
            r = runs[n].get(k)
            ratio = r and (r.get("vs_jax_eager") if k[0] == "W8" else r.get("vs_jax_jit"))
            t = r and (f"{r['us_per_op']:.2f} us" if "us_per_op" in r else f"{r['ms']:.3f}")
            row.append("-" if r is None else t + (f" ({ratio:.2f})" if ratio else ""))
        for n in counts:
            if n != 1:
                a, b = runs.get(1, {}).get(k), runs[n].get(k)
                row.append(f"{a['ms'] / b['ms']:.2f}x" if a and b else "-")
        rows.append(row)
    (out / "scaling.md").write_text(
        "# mirax benchmark suite: per-core scaling\n\nTime per call (ms; W8: us per op) and, in "
        "brackets, the ratio to JAX jit at the same thread count (W8: to JAX eager); "
        "speedup: one thread's time over N threads' time, same framework.\n\n" +
        markdown_table(header, rows) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--only", type=lambda s: s.split(","), default=None)
    ap.add_argument("--torch-compile", action="store_true")
    ap.add_argument("--no-eager", dest="eager", action="store_false")
    ap.add_argument("--no-torch", action="store_true",
                    help="leave PyTorch out of the process: after each of its calls its "
                         "OpenMP threads spin for a while and take the cores from the "
                         "threads of mirax (and JAX) that run next")
    ap.add_argument("--threads", type=int, default=1,
                    help="cores for every framework (0: all; read before the imports)")
    ap.add_argument("--scaling", action="store_true", help="only rebuild scaling.md")
    ap.add_argument("--profile", action="store_true",
                    help="time nothing: print the mirax jit cases' top plan nodes")
    args = ap.parse_args(argv)
    if args.scaling:
        write_scaling(HERE / "results")
        return
    t0 = time.perf_counter()
    results = run(args)
    if not args.profile:
        save(results, args)
    print(f"total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
