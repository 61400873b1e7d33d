"""Fused composite kernels vs their bodies, eager on the CPU.

For each composite: the forward pass (the fused NumPy kernel vs the body run op by op)
and the backward pass (vjp: the fused backward composite vs the vjp of the body). Prints
a markdown table of median times and body / fused ratios (> 1: the fused kernel wins).

    python benchmarks/composites.py [--small]
"""
import sys

from common import interleave, markdown_table, single_thread

single_thread()

import numpy as np  # noqa: E402

import mirax as mx  # noqa: E402
from mirax.compiler.decompose import decompose  # noqa: E402
from mirax.graph.interpret import eval_graph  # noqa: E402
from mirax.interpreters.vjp import vjp_flat  # noqa: E402

nn = mx.nn


def cases(small: bool):
    rng = np.random.default_rng(0)
    n, c, d = (64, 100, 64) if small else (512, 1000, 512)
    b, t, h, hd = (2, 64, 4, 32) if small else (4, 256, 8, 64)
    e, nodes = (2000, 200) if small else (50000, 5000)
    x = rng.standard_normal((n, c)).astype(np.float32)
    lab = rng.integers(0, c, n).astype(np.int32)
    hx = rng.standard_normal((n, d)).astype(np.float32)
    w = rng.standard_normal(d).astype(np.float32)
    q, k, v = (rng.standard_normal((b, t, h, hd)).astype(np.float32) for _ in range(3))
    img = rng.standard_normal((8, 16, 32, 32)).astype(np.float32)
    ex = rng.standard_normal((e, 4)).astype(np.float32)
    seg = rng.integers(0, nodes, e)
    return {
        "softmax": (lambda x: nn.softmax(x), (x,)),
        "log_softmax": (lambda x: nn.log_softmax(x), (x,)),
        "logsumexp": (lambda x: nn.logsumexp(x, axis=-1), (x,)),
        "softmax_cross_entropy": (lambda x: nn.softmax_cross_entropy(x, lab), (x,)),
        "layer_norm": (lambda x, w: nn.layer_norm(x, w, w), (hx, w)),
        "rms_norm": (lambda x, w: nn.rms_norm(x, w), (hx, w)),
        "gelu": (lambda x: nn.gelu(x), (hx,)),
        "gelu_erf": (lambda x: nn.gelu(x, approximate=False), (hx,)),
        "silu": (lambda x: nn.silu(x), (hx,)),
        "softplus": (lambda x: nn.softplus(x), (hx,)),
        "attention_causal": (lambda q, k, v: nn.dot_product_attention(q, k, v, is_causal=True),
                             (q, k, v)),
        "max_pool2d": (lambda x: nn.max_pool2d(x, 3, 2, 1), (img,)),
        "avg_pool2d": (lambda x: nn.avg_pool2d(x, 3, 2, 1), (img,)),
        "segment_softmax": (lambda x: nn.segment_softmax(x, seg, nodes), (ex,)),
    }


def main():
    small = "--small" in sys.argv
    rows = []
    for name, (f, args) in cases(small).items():
        args = [mx.asarray(a) for a in args]
        ct = [mx.asarray(np.ones(np.shape(f(*args)), np.float32))]

        graph = decompose(mx.make_graph(f)(*args))  # the body, run op by op (eagerly)
        body_f = lambda *xs: eval_graph(graph, *xs)[0]  # noqa: E731

        def timed(fn):
            def fwd():
                np.asarray(fn(*args))

            def bwd():
                _, back = vjp_flat(lambda *xs: [fn(*xs)], args)
                [np.asarray(g) for g in back(ct) if g is not None]
            return interleave({"fwd": fwd, "bwd": bwd}, rounds=5)

        fused, body = timed(f), timed(body_f)
        rows.append([name, f"{1e3 * fused['fwd']:.2f}", f"{1e3 * body['fwd']:.2f}",
                     f"{body['fwd'] / fused['fwd']:.2f}x", f"{1e3 * fused['bwd']:.2f}",
                     f"{1e3 * body['bwd']:.2f}", f"{body['bwd'] / fused['bwd']:.2f}x"])
        print(f"{name}: done", file=sys.stderr)
    print(markdown_table(["op", "fused fwd ms", "body fwd ms", "ratio", "fused fwd+bwd ms",
                          "body fwd+bwd ms", "ratio"], rows))


if __name__ == "__main__":
    main()
