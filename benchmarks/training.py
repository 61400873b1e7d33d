"""Steady-state training epochs of four small models written for JAX, run as written under
mirax and under JAX in the same process: an MLP classifier, a VAE, a small ResNet and a
small transformer language model.

    python benchmarks/training.py [--threads N] [--rounds 5] [--only mlp,vae,resnet,transformer]

Each model is one source (`make_*` below) given the framework's modules (`jax`, `jnp`,
`lax`, `nn`): the same code, the same initial weights and data (NumPy), a jitted update
step (forward, backward, the optimizer written inline) and an epoch of `STEPS` steps
driven from Python as a user's loop is. The first epoch (compilation) is not timed; the
figure is the median epoch over interleaved rounds (mirax, JAX, mirax, ...), with a
check that both frameworks' final losses agree. --threads as in benchmarks/suite.py
(default 0: every core; 1: one pinned thread). Results: benchmarks/results/training.md.
"""
from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import blas_line, interleave, markdown_table, threads_from_argv  # noqa: E402

THREADS = threads_from_argv(0)

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(HERE.parent))
import mirax as mx  # noqa: E402

import jax  # noqa: E402
jax.config.update("jax_enable_x64", False)

STEPS = 20   # steps an epoch
RNG = np.random.default_rng(0)


def _init(*shapes, scale=1.0):
    return [(RNG.standard_normal(s) * scale / np.sqrt(s[0] if len(s) > 1 else 1))
            .astype(np.float32) for s in shapes]


def _adam_step(jax, jnp, loss, params):
    """(jitted step(state, *batch) -> (state, loss), (initial state,)): Adam, lr 1e-3,
    written inline as a JAX user would."""
    @jax.jit
    def step(state, *batch):
        p, m, v, t = state
        val, g = jax.value_and_grad(loss)(p, *batch)
        t = t + 1.0
        m = jax.tree_util.tree_map(lambda m, g: 0.9 * m + 0.1 * g, m, g)
        v = jax.tree_util.tree_map(lambda v, g: 0.999 * v + 0.001 * g * g, v, g)
        p = jax.tree_util.tree_map(
            lambda p, m, v: p - 1e-3 * (m / (1 - 0.9 ** t)) / (jnp.sqrt(v / (1 - 0.999 ** t))
                                                                + 1e-8), p, m, v)
        return (p, m, v, t), val
    zeros = jax.tree_util.tree_map(np.zeros_like, params)
    return step, ((params, zeros, zeros, np.float32(0.0)),)


# --- the models, written once for JAX's API ------------------------------------------------
def make_mlp(jax, jnp, lax, nn):
    """784-1024-1024-10 relu MLP, softmax cross-entropy, SGD with momentum, batch 128."""
    sizes = [784, 1024, 1024, 10]
    params = [(w, np.zeros(w.shape[1], np.float32))
              for w in _init(*zip(sizes[:-1], sizes[1:]))]
    x = RNG.standard_normal((STEPS, 128, 784)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[RNG.integers(0, 10, (STEPS, 128))]

    def loss(params, x, y):
        h = x
        for w, b in params[:-1]:
            h = jnp.maximum(h @ w + b, 0.0)
        w, b = params[-1]
        return -jnp.mean(jnp.sum(y * nn.log_softmax(h @ w + b), axis=1))

    @jax.jit
    def step(params, vel, x, y):
        val, g = jax.value_and_grad(loss)(params, x, y)
        vel = jax.tree_util.tree_map(lambda v, g: 0.9 * v + g, vel, g)
        params = jax.tree_util.tree_map(lambda p, v: p - 0.01 * v, params, vel)
        return params, vel, val
    vel = jax.tree_util.tree_map(np.zeros_like, params)
    return step, (params, vel), (x, y)


def make_vae(jax, jnp, lax, nn):
    """VAE 784-512-(2x32) / 32-512-784, Bernoulli likelihood, Adam, batch 128."""
    params = {"enc": _init((784, 512)), "mu": _init((512, 32)), "lv": _init((512, 32)),
              "dec": _init((32, 512)), "out": _init((512, 784))}
    params = {k: v[0] for k, v in params.items()}
    x = (RNG.random((STEPS, 128, 784)) < 0.3).astype(np.float32)
    eps = RNG.standard_normal((STEPS, 128, 32)).astype(np.float32)

    def loss(p, x, eps):
        h = jnp.tanh(x @ p["enc"])
        mu, logvar = h @ p["mu"], h @ p["lv"]
        z = mu + jnp.exp(0.5 * logvar) * eps
        logits = jnp.tanh(z @ p["dec"]) @ p["out"]
        rec = jnp.sum(x * logits - nn.softplus(logits), axis=1)
        kl = 0.5 * jnp.sum(jnp.exp(logvar) + mu ** 2 - 1.0 - logvar, axis=1)
        return jnp.mean(kl - rec)

    return (*_adam_step(jax, jnp, loss, params), (x, eps))


def make_resnet(jax, jnp, lax, nn):
    """A small ResNet on 16x16x3 images: a 3x3 stem to 16 channels, two residual blocks
    (3x3 convs, relu), global average pooling, a linear classifier; SGD, batch 16."""
    def conv_w(cin, cout):
        return (RNG.standard_normal((3, 3, cin, cout)) * np.sqrt(2.0 / (9 * cin))) \
            .astype(np.float32)
    params = {"stem": conv_w(3, 16), "b1a": conv_w(16, 16), "b1b": conv_w(16, 16),
              "b2a": conv_w(16, 16), "b2b": conv_w(16, 16), "fc": _init((16, 10))[0]}
    x = RNG.standard_normal((STEPS, 16, 16, 16, 3)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[RNG.integers(0, 10, (STEPS, 16))]

    def conv(h, w):
        return lax.conv_general_dilated(h, w, (1, 1), "SAME",
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def loss(p, x, y):
        h = jnp.maximum(conv(x, p["stem"]), 0.0)
        for a, b in (("b1a", "b1b"), ("b2a", "b2b")):
            h = jnp.maximum(h + conv(jnp.maximum(conv(h, p[a]), 0.0), p[b]), 0.0)
        logits = jnp.mean(h, axis=(1, 2)) @ p["fc"]
        return -jnp.mean(jnp.sum(y * nn.log_softmax(logits), axis=1))

    @jax.jit
    def step(p, x, y):
        val, g = jax.value_and_grad(loss)(p, x, y)
        return jax.tree_util.tree_map(lambda p, g: p - 0.05 * g, p, g), val
    return step, (params,), (x, y)


def make_transformer(jax, jnp, lax, nn):
    """A 2-layer pre-LN causal transformer LM (d 128, 4 heads, MLP 512, gelu), vocabulary
    64, context 64, batch 16; Adam."""
    d, heads, ctx, vocab, layers = 128, 4, 64, 64, 2
    params = {"emb": (RNG.standard_normal((vocab, d)) * 0.02).astype(np.float32),
              "pos": (RNG.standard_normal((ctx, d)) * 0.02).astype(np.float32),
              "blocks": [{"qkv": _init((d, 3 * d))[0], "o": _init((d, d))[0],
                          "up": _init((d, 4 * d))[0], "down": _init((4 * d, d))[0],
                          "g1": np.ones(d, np.float32), "g2": np.ones(d, np.float32)}
                         for _ in range(layers)]}
    toks = RNG.integers(0, vocab, (STEPS, 16, ctx + 1))
    x, y = toks[..., :-1].astype(np.int32), toks[..., 1:].astype(np.int32)
    mask = np.tril(np.ones((ctx, ctx), bool))

    def norm(h, g):
        mu = jnp.mean(h, axis=-1, keepdims=True)
        var = jnp.mean((h - mu) ** 2, axis=-1, keepdims=True)
        return (h - mu) / jnp.sqrt(var + 1e-5) * g

    def loss(p, x, y):
        h = p["emb"][x] + p["pos"]
        B, T, _ = h.shape
        for blk in p["blocks"]:
            q, k, v = jnp.split(norm(h, blk["g1"]) @ blk["qkv"], 3, axis=-1)
            q, k, v = (a.reshape(B, T, heads, d // heads) for a in (q, k, v))
            s = jnp.einsum("bthd,bshd->bhts", q, k) / np.sqrt(d // heads)
            a = nn.softmax(jnp.where(mask, s, -1e9), axis=-1)
            h = h + jnp.einsum("bhts,bshd->bthd", a, v).reshape(B, T, d) @ blk["o"]
            h = h + nn.gelu(norm(h, blk["g2"]) @ blk["up"]) @ blk["down"]
        logits = h @ p["emb"].T
        return -jnp.mean(jnp.take_along_axis(nn.log_softmax(logits), y[..., None], axis=-1))

    return (*_adam_step(jax, jnp, loss, params), (x, y))


MODELS = {"mlp": make_mlp, "vae": make_vae, "resnet": make_resnet,
          "transformer": make_transformer}


def _frameworks():
    import jax.numpy as jnp
    return {"mirax": (mx, mx.numpy, mx.lax, mx.nn),
            "jax": (jax, jnp, jax.lax, jax.nn)}


def epoch_runner(make, fw):
    """An epoch function (STEPS jitted steps on the epoch's batches) and the last loss."""
    global RNG
    RNG = np.random.default_rng(0)   # the same weights and data for every framework
    step, state, data = make(*fw)
    box = {"state": state, "loss": None}

    def epoch():
        state = box["state"]
        for i in range(STEPS):
            *state, loss = step(*state, *(d[i] for d in data))
        box["state"], box["loss"] = tuple(state), loss
        np.asarray(loss)   # (JAX: wait for the device)
    return epoch, box


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", type=lambda s: s.split(","), default=None)
    args = ap.parse_args(argv)
    rows = []
    for name, make in MODELS.items():
        if args.only and name not in args.only:
            continue
        cases, boxes, first = {}, {}, {}
        for fw_name, fw in _frameworks().items():
            epoch, box = epoch_runner(make, fw)
            t0 = time.perf_counter()
            epoch()   # compiles
            first[fw_name] = time.perf_counter() - t0
            cases[fw_name], boxes[fw_name] = epoch, box
        times = interleave(cases, rounds=args.rounds, warmup=0)
        lm, lj = float(np.asarray(boxes["mirax"]["loss"])), float(np.asarray(boxes["jax"]["loss"]))
        agree = abs(lm - lj) <= 1e-2 * max(1.0, abs(lj))
        rows.append([name, f"{1e3 * times['mirax']:.1f}", f"{1e3 * times['jax']:.1f}",
                     f"{times['mirax'] / times['jax']:.2f}", f"{first['mirax']:.2f}",
                     f"{first['jax']:.2f}", f"{lm:.4f} / {lj:.4f}" + ("" if agree else " (!)")])
        print(f"{name}: mirax {1e3 * times['mirax']:.1f} ms/epoch, JAX "
              f"{1e3 * times['jax']:.1f} ms ({times['mirax'] / times['jax']:.2f}x); first "
              f"epoch {first['mirax']:.2f} s vs {first['jax']:.2f} s; losses {lm:.4f} / "
              f"{lj:.4f}", flush=True)
    head = ["model", "mirax ms/epoch", "JAX ms/epoch", "mirax / JAX", "mirax first epoch s",
            "JAX first epoch s", "final loss mirax / JAX"]
    blas = blas_line()
    text = (f"# Training epochs, mirax vs JAX\n\n`python benchmarks/training.py --threads "
            f"{args.threads}`: {THREADS} thread(s), {STEPS} steps an epoch, median of "
            f"{args.rounds} interleaved rounds after the compiling epoch. BLAS: {blas}.\n\n"
            + markdown_table(head, rows) + "\n")
    out = HERE / "results" / f"training_{THREADS}t.md"
    if not args.only:
        out.write_text(text)
        print(f"wrote {out}")
    print(text)


if __name__ == "__main__":
    main()
