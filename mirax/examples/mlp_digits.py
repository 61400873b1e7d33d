"""An MLP classifier on the UCI 8x8 handwritten digits (1,797 images, 10 classes).

    python -m mirax.examples.mlp_digits [--steps 600] [--width 128] ...

mx.nn.MLP + softmax_cross_entropy + adam, minibatches drawn with mx.random, a held-out test
split (20%, stratified by a random permutation). Prints test accuracy; writes
mlp_digits_loss.png when matplotlib is installed. The data (E. Alpaydin and C. Kaynak, UCI
Machine Learning Repository, CC BY 4.0, as shipped by scikit-learn) is in mirax/examples/data.
"""
from __future__ import annotations

import argparse
import gzip
import time

import numpy as np

import mirax as mx
import mirax.numpy as mnp
from mirax import nn, optim
from mirax.examples.common import Progress, add_run_args, data_path, plot_curves, start_run


def load_digits() -> tuple[np.ndarray, np.ndarray]:
    with gzip.open(data_path("digits.csv.gz"), "rt") as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.float32)
    return table[:, :-1] / 16.0, table[:, -1].astype(np.int32)


def split(x, y, key, test_fraction: float):
    """A stratified split: each class's examples in random order, the first part to test."""
    perm = np.asarray(mx.random.permutation(key, len(y)))
    test = np.zeros(len(y), bool)
    for c in np.unique(y):
        idx = perm[y[perm] == c]
        test[idx[:int(round(test_fraction * len(idx)))]] = True
    return (x[~test], y[~test]), (x[test], y[test])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--depth", type=int, default=2)
    ap.add_argument("--lr", type=float, default=2e-3)
    add_run_args(ap, "mlp_digits")
    args = ap.parse_args(argv)
    say = start_run(args)

    x, y = load_digits()
    key = mx.random.key(args.seed)
    key, skey, mkey = mx.random.split(key, 3)
    (xtr, ytr), (xte, yte) = split(x, y, skey, 0.2)
    say(f"mlp_digits: {len(ytr)} training and {len(yte)} test images of 8x8 pixels")
    xtr, ytr, xte, yte = map(mnp.asarray, (xtr, ytr, xte, yte))

    model = nn.MLP(64, 10, args.width, args.depth, activation=nn.relu, key=mkey)
    opt = optim.adam(optim.cosine_decay_schedule(args.lr, args.steps, alpha=0.05))
    state = opt.init(model)

    def loss_fn(model, x, y):
        return mnp.mean(nn.softmax_cross_entropy(model(x), y))

    @mx.jit
    def step(model, state, key):
        idx = mx.random.randint(key, (args.batch,), 0, xtr.shape[0])
        loss, grads = mx.value_and_grad(loss_fn)(model, xtr[idx], ytr[idx])
        updates, state = opt.update(grads, state, model)
        return optim.apply_updates(model, updates), state, loss

    @mx.jit
    def accuracy(model, x, y):
        return mnp.mean((mnp.argmax(model(x), axis=-1) == y).astype(mnp.float32))

    losses = []
    t0 = time.perf_counter()
    bar = Progress(args.steps, "mlp_digits", quiet=args.quiet)
    for i in bar:
        model, state, loss = step(model, state, mx.random.fold_in(key, i))
        losses.append(float(loss))
        bar.set(loss=float(np.mean(losses[-20:])))
    seconds = time.perf_counter() - t0
    train_acc = float(accuracy(model, xtr, ytr))
    test_acc = float(accuracy(model, xte, yte))
    png = plot_curves(args.plot or None,
                      {"train loss": (np.arange(1, len(losses) + 1), losses)},
                      f"MLP on UCI digits (test accuracy {test_acc:.1%})", "cross-entropy")
    say(f"mlp_digits: test accuracy {test_acc:.2%} (train {train_acc:.2%}), final loss "
        f"{np.mean(losses[-20:]):.4f}, {args.steps} steps in {seconds:.1f} s"
        + (f"; curve in {png}" if png else ""))
    return {"test_accuracy": test_acc, "train_accuracy": train_acc, "losses": losses,
            "seconds": seconds}


if __name__ == "__main__":
    main()
