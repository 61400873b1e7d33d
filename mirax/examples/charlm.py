"""A character-level transformer language model trained on the Book of Genesis (KJV).

    python -m mirax.examples.charlm [--steps 1000] [--layers 2] [--dim 96] ...

Pre-LN transformer blocks built from mx.nn modules (LayerNorm, MultiHeadAttention with causal
dot_product_attention, a GELU MLP), token + position embeddings, softmax_cross_entropy, one
jit-compiled step of value_and_grad + adamw with a warmup-cosine schedule and global-norm
clipping. Prints the unigram entropy of the text (the loss of the best model that ignores
context) next to the model's held-out loss, samples text at the end, and writes
charlm_loss.png when matplotlib is installed. The text ships in mirax/examples/data.

Data-parallel (--data-parallel): the step is pmap'd over every device of every process
(mpiexec -n 2 python -m mirax.examples.charlm --data-parallel; or MIRAX_CPU_DEVICES=2 in
one process), each member taking its slice of the same global batch; the gradients are
averaged by bucketed all-reduces inside the step (mx.distributed.data_parallel), so the
losses are those of one process at the same global batch. --checkpoint PATH: process 0
saves the parameters at the end (they load under any process count).
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import mirax as mx
import mirax.numpy as mnp
from mirax import nn, optim
from mirax.examples.common import (Progress, add_run_args, data_path, plot_curves,
                                   start_run)


# --- data ----------------------------------------------------------------------------------
def load_text() -> str:
    lines = data_path("genesis.txt").read_text(encoding="utf-8").splitlines()
    return "\n".join(line for line in lines if not line.startswith("#")) + "\n"


def unigram_entropy(ids: np.ndarray, vocab: int) -> float:
    p = np.bincount(ids, minlength=vocab) / len(ids)
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


# --- model ---------------------------------------------------------------------------------
class Block(nn.Module):
    """x + attn(ln(x)), then x + mlp(ln(x)) (pre-LN)."""
    ln1: nn.LayerNorm
    attn: nn.MultiHeadAttention
    ln2: nn.LayerNorm
    mlp: nn.MLP

    def __init__(self, dim: int, heads: int, *, key):
        k1, k2 = mx.random.split(key)
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = nn.MultiHeadAttention(heads, dim, key=k1)
        self.mlp = nn.MLP(dim, dim, 4 * dim, 1, activation=nn.gelu, key=k2)

    def __call__(self, x):
        x = x + self.attn(self.ln1(x), is_causal=True)
        return x + self.mlp(self.ln2(x))


class CharLM(nn.Module):
    tok: nn.Embedding
    pos: nn.Embedding
    blocks: tuple
    ln_f: nn.LayerNorm
    head: nn.Linear

    def __init__(self, vocab: int, context: int, dim: int, heads: int, layers: int, *, key):
        keys = mx.random.split(key, layers + 3)
        self.tok = nn.Embedding(vocab, dim, key=keys[0])
        self.pos = nn.Embedding(context, dim, key=keys[1])
        # small embeddings (GPT-2 style, std 0.02) keep the first steps stable
        self.tok = mx.tree.map(lambda w: w * 0.02, self.tok)
        self.pos = mx.tree.map(lambda w: w * 0.02, self.pos)
        self.blocks = tuple(Block(dim, heads, key=keys[2 + i]) for i in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, key=keys[-1])

    def __call__(self, ids):                      # ids [B, T] -> logits [B, T, vocab]
        t = ids.shape[-1]
        x = self.tok(ids) + self.pos.weight[:t]
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def loss_fn(model, ids, targets):
    logits = model(ids)
    v = logits.shape[-1]
    return mnp.mean(nn.softmax_cross_entropy(logits.reshape(-1, v), targets.reshape(-1)))


def get_batch(data: np.ndarray, key, batch: int, context: int):
    starts = np.asarray(_starts(key, batch, len(data) - context - 1))
    x = np.stack([data[s:s + context] for s in starts])
    y = np.stack([data[s + 1:s + context + 1] for s in starts])
    return mnp.asarray(x), mnp.asarray(y)


@mx.jit(static_argnums=(1, 2))
def _starts(key, batch, high):
    return mx.random.randint(key, (batch,), 0, high)


def sample(model, prompt: np.ndarray, n: int, key, temperature: float, context: int):
    """Autoregressive sampling with a sliding window of `context` characters."""
    @mx.jit
    def next_token(model, window, key):
        logits = model(window[None])[0, -1]
        return mx.random.categorical(key, logits / temperature)
    window, out = list(prompt[-context:]), []
    for i in range(n):
        tok = int(next_token(model, mnp.asarray(np.array(window, np.int32)),
                             mx.random.fold_in(key, i)))
        out.append(tok)
        window = window[1:] + [tok]
    return out


def _trailing_mean(xs, n: int) -> np.ndarray:
    c = np.cumsum(np.concatenate([[0.0], xs]))
    i = np.arange(1, len(xs) + 1)
    return (c[i] - c[np.maximum(i - n, 0)]) / np.minimum(i, n)


# --- training ------------------------------------------------------------------------------
def data_parallel_step(loss_fn, opt, axis="batch"):
    """step(model, state, x, y) -> (model, state, loss) on the global batch x, y, computed
    by pmap over every device of every process: each member takes its slice, the gradients
    and the loss are averaged by bucketed all-reduces inside the compiled step, and every
    member applies the same update. Takes and returns unreplicated model and state (the
    members' copies are equal)."""
    dp = mx.distributed.data_parallel

    def member_step(model, state, x, y):
        loss, grads = mx.value_and_grad(loss_fn)(model, x, y)
        grads = dp.allreduce_mean(grads, axis)
        updates, state = opt.update(grads, state, model)
        return optim.apply_updates(model, updates), state, mx.lax.pmean(loss, axis)

    pstep = mx.pmap(member_step, axis_name=axis)
    box = {}

    def step(model, state, x, y):
        if box.get("model") is not model:   # (the replicas the last step returned)
            box["rep"] = dp.replicate((model, state))
        model_r, state_r = box["rep"]
        model_r, state_r, loss = pstep(model_r, state_r, dp.shard_batch(x), dp.shard_batch(y))
        box["rep"] = (model_r, state_r)
        model, state = dp.unreplicate((model_r, state_r))
        box["model"] = model
        return model, state, loss[0]
    return step


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--context", type=int, default=64)
    ap.add_argument("--dim", type=int, default=96)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--eval-batches", type=int, default=8)
    ap.add_argument("--sample-chars", type=int, default=300)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--data-parallel", action="store_true",
                    help="pmap the step over every device of every process (mpiexec -n N)")
    ap.add_argument("--checkpoint", default="", help="save the parameters here at the end")
    add_run_args(ap, "charlm")
    args = ap.parse_args(argv)
    say = start_run(args)
    if args.data_parallel:
        mx.distributed.initialize()
        if mx.process_index() != 0:
            say = lambda *a: None  # noqa: E731  (one process reports)

    text = load_text()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = np.array([stoi[c] for c in text], np.int32)
    split = int(0.9 * len(data))
    train, val = data[:split], data[split:]
    h_uni = unigram_entropy(train, len(chars))
    say(f"charlm: {len(text):,} characters of Genesis (KJV), vocabulary {len(chars)}, "
        f"unigram entropy {h_uni:.3f} nats/char ({h_uni / np.log(2):.3f} bits)")

    key = mx.random.key(args.seed)
    key, mkey = mx.random.split(key)
    model = CharLM(len(chars), args.context, args.dim, args.heads, args.layers, key=mkey)
    n_params = sum(x.size for x in mx.tree.leaves(model))
    say(f"charlm: {args.layers} layers, dim {args.dim}, {args.heads} heads, context "
        f"{args.context}: {n_params:,} parameters")
    schedule = optim.warmup_cosine_decay_schedule(0.0, args.lr, min(100, args.steps // 10 + 1),
                                                  args.steps, end_value=args.lr / 10)
    opt = optim.chain(optim.clip_by_global_norm(1.0),
                      optim.adamw(schedule, b2=0.99, weight_decay=1e-4))
    state = opt.init(model)

    @mx.jit
    def step(model, state, x, y):
        loss, grads = mx.value_and_grad(loss_fn)(model, x, y)
        updates, state = opt.update(grads, state, model)
        return optim.apply_updates(model, updates), state, loss

    if args.data_parallel:
        step = data_parallel_step(loss_fn, opt)

    eval_loss = mx.jit(loss_fn)
    ekey = mx.random.key(args.seed + 1)
    val_batches = [get_batch(val, mx.random.fold_in(ekey, i), args.batch, args.context)
                   for i in range(args.eval_batches)]

    def evaluate(model):
        return float(np.mean([float(eval_loss(model, x, y)) for x, y in val_batches]))

    losses, evals = [], []
    t0 = time.perf_counter()
    bar = Progress(args.steps, "charlm", quiet=args.quiet or mx.process_index() != 0)
    eval_every = max(1, args.steps // 5)
    for i in bar:
        key, bkey = mx.random.split(key)
        x, y = get_batch(train, bkey, args.batch, args.context)
        model, state, loss = step(model, state, x, y)
        losses.append(float(loss))
        bar.set(loss=float(np.mean(losses[-20:])))
        if (i + 1) % eval_every == 0 or i + 1 == args.steps:
            evals.append((i + 1, evaluate(model)))
            bar.write(f"step {i + 1}: train {np.mean(losses[-20:]):.3f}  "
                      f"held-out {evals[-1][1]:.3f} nats/char")
    train_time = time.perf_counter() - t0
    final = evals[-1][1]
    if args.checkpoint:
        if mx.process_index() == 0:
            mx.io.save(args.checkpoint, model)
        mx.distributed.data_parallel.barrier()
        say(f"charlm: parameters saved to {args.checkpoint}")

    prompt = val[:args.context]
    out = sample(model, prompt, args.sample_chars, mx.random.fold_in(key, 99),
                 args.temperature, args.context)
    text_out = "".join(chars[i] for i in out)
    say("--- sample (prompt: the first %d held-out characters) ---" % args.context)
    say("".join(chars[i] for i in prompt) + "|" + text_out)
    say("---")
    png = plot_curves(args.plot or None,
                      {"train (20-step mean)": (np.arange(1, len(losses) + 1),
                                                _trailing_mean(losses, 20)),
                       "held-out": tuple(zip(*evals))},
                      "charlm on Genesis (KJV)", "cross-entropy (nats/char)",
                      {"unigram entropy": h_uni})
    say(f"charlm: held-out loss {final:.3f} nats/char vs unigram entropy {h_uni:.3f} "
        f"({final / np.log(2):.2f} vs {h_uni / np.log(2):.2f} bits) after {args.steps} steps "
        f"in {train_time:.1f} s ({train_time / args.steps * 1e3:.0f} ms/step)"
        + (f"; curve in {png}" if png else ""))
    return {"loss": final, "unigram_entropy": h_uni, "train_losses": losses,
            "sample": text_out, "seconds": train_time}


if __name__ == "__main__":
    main()
