"""A graph attention network (GAT) on Zachary's karate club: which faction will each member
join, knowing only the instructor's and the administrator's?

    python -m mirax.examples.gnn [--steps 200] [--hidden 8] [--heads 4] [--labeled 0,33]

Message passing is written with mx.nn's graph ops: index_select gathers each edge's source
features, segment_softmax normalizes attention over each node's incoming edges, index_add
sums the messages into the destination nodes (Velickovic et al., 2018). Node features are
one-hot ids, so everything the model knows comes from the graph. Prints accuracy on the
unlabeled members; writes gnn_loss.png when matplotlib is installed.

Data: W. W. Zachary, "An Information Flow Model for Conflict and Fission in Small Groups",
J. Anthropological Research 33 (1977): 34 members, 78 friendships, and the club each member
joined after the split (0 = the instructor "Mr. Hi"'s, 1 = the administrator's), numbered
from 0 as in networkx.karate_club_graph.
"""
from __future__ import annotations

import argparse
from typing import Any

import numpy as np

import mirax as mx
import mirax.numpy as mnp
from mirax import nn, optim
from mirax.examples.common import add_run_args, fit, plot_curves, start_run

# friendships (1-based member -> higher-numbered friends), as tabulated by Zachary
_FRIENDS = {
    1: (2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 18, 20, 22, 32),
    2: (3, 4, 8, 14, 18, 20, 22, 31), 3: (4, 8, 9, 10, 14, 28, 29, 33), 4: (8, 13, 14),
    5: (7, 11), 6: (7, 11, 17), 7: (17,), 9: (31, 33, 34), 10: (34,), 14: (34,), 15: (33, 34),
    16: (33, 34), 19: (33, 34), 20: (34,), 21: (33, 34), 23: (33, 34),
    24: (26, 28, 30, 33, 34), 25: (26, 28, 32), 26: (32,), 27: (30, 34), 28: (34,),
    29: (32, 34), 30: (33, 34), 31: (33, 34), 32: (33, 34), 33: (34,),
}
N_MEMBERS = 34
EDGES = np.array([(a - 1, b - 1) for a, bs in _FRIENDS.items() for b in bs], np.int32)
MR_HI_CLUB = {0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 16, 17, 19, 21}
LABELS = np.array([0 if i in MR_HI_CLUB else 1 for i in range(N_MEMBERS)], np.int32)
assert len(EDGES) == 78


def message_edges():
    """Both directions of every friendship plus a self-loop per node: (src, dst)."""
    loops = np.arange(N_MEMBERS, dtype=np.int32)
    src = np.concatenate([EDGES[:, 0], EDGES[:, 1], loops])
    dst = np.concatenate([EDGES[:, 1], EDGES[:, 0], loops])
    return mnp.asarray(src), mnp.asarray(dst)


class GATLayer(nn.Module):
    """h_i' = sum_j alpha_ij W h_j over incoming edges j -> i, per head, with
    alpha_ij = softmax_j(leaky_relu(a_src . W h_j + a_dst . W h_i))."""
    weight: Any          # [in, heads * out]
    att_src: Any         # [heads, out]
    att_dst: Any         # [heads, out]
    bias: Any            # [heads * out]
    heads: int = nn.static_field()

    def __init__(self, in_dim: int, out_dim: int, heads: int, *, key):
        k1, k2, k3 = mx.random.split(key, 3)
        self.weight = nn.init.glorot_uniform()(k1, (in_dim, heads * out_dim))
        self.att_src = nn.init.glorot_uniform()(k2, (heads, out_dim))
        self.att_dst = nn.init.glorot_uniform()(k3, (heads, out_dim))
        self.bias = mnp.zeros((heads * out_dim,))
        self.heads = heads

    def __call__(self, x, src, dst):
        n = x.shape[0]
        h = (x @ self.weight).reshape(n, self.heads, -1)               # [N, H, F]
        score_src = mnp.sum(h * self.att_src, axis=-1)                  # [N, H]
        score_dst = mnp.sum(h * self.att_dst, axis=-1)
        e = nn.leaky_relu(nn.index_select(score_src, src) + nn.index_select(score_dst, dst),
                          0.2)                                          # [E, H]
        alpha = nn.segment_softmax(e, dst, n)                           # over in-edges
        msg = alpha[..., None] * nn.index_select(h, src)                # [E, H, F]
        return nn.index_add(msg, dst, n).reshape(n, -1) + self.bias


class GAT(nn.Module):
    layer1: GATLayer
    layer2: GATLayer

    def __init__(self, in_dim: int, hidden: int, heads: int, classes: int, *, key):
        k1, k2 = mx.random.split(key)
        self.layer1 = GATLayer(in_dim, hidden, heads, key=k1)
        self.layer2 = GATLayer(heads * hidden, classes, 1, key=k2)

    def __call__(self, x, src, dst):
        return self.layer2(nn.elu(self.layer1(x, src, dst)), src, dst)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--hidden", type=int, default=8)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--labeled", default="0,33", help="members whose faction is known")
    add_run_args(ap, "gnn")
    args = ap.parse_args(argv)
    say = start_run(args)

    src, dst = message_edges()
    x = mnp.eye(N_MEMBERS)
    labeled = np.array([int(i) for i in args.labeled.split(",")], np.int32)
    unlabeled = np.setdiff1d(np.arange(N_MEMBERS), labeled).astype(np.int32)
    y = mnp.asarray(LABELS)
    say(f"gnn: karate club, {N_MEMBERS} members, {len(EDGES)} friendships; "
        f"{len(labeled)} labeled members {labeled.tolist()}")

    model = GAT(N_MEMBERS, args.hidden, args.heads, 2, key=mx.random.key(args.seed))
    opt = optim.adamw(args.lr, weight_decay=5e-4)
    state = opt.init(model)
    lab = mnp.asarray(labeled)

    def loss_fn(model):
        logits = model(x, src, dst)
        return mnp.mean(nn.softmax_cross_entropy(logits[lab], y[lab]))

    @mx.jit
    def step(model, state):
        loss, grads = mx.value_and_grad(loss_fn)(model)
        updates, state = opt.update(grads, state, model)
        return optim.apply_updates(model, updates), state, loss

    model, state, losses, seconds = fit(step, model, state, args.steps, "gnn",
                                        quiet=args.quiet)
    pred = np.asarray(mnp.argmax(model(x, src, dst), axis=-1))
    acc = float(np.mean(pred[unlabeled] == LABELS[unlabeled]))
    wrong = unlabeled[pred[unlabeled] != LABELS[unlabeled]].tolist()
    png = plot_curves(args.plot or None, {"train loss": (np.arange(1, len(losses) + 1),
                                                          losses)},
                      f"GAT on the karate club (accuracy {acc:.0%})", "cross-entropy")
    say(f"gnn: accuracy {acc:.1%} on the {len(unlabeled)} unlabeled members "
        f"(misclassified: {wrong or 'none'}), final loss {losses[-1]:.4f}, {args.steps} steps "
        f"in {seconds:.1f} s" + (f"; curve in {png}" if png else ""))
    return {"accuracy": acc, "losses": losses, "seconds": seconds, "misclassified": wrong}


if __name__ == "__main__":
    main()
