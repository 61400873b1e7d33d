"""Fit an interatomic potential to forces: a learned pair potential on Lennard-Jones data.

    python -m mirax.examples.forces [--steps 400] [--atoms 8] [--configs 128] ...

The model's energy is E(R) = sum over atom pairs of phi(|R_i - R_j|), phi an MLP on a
Gaussian radial basis of the distance; its forces are F = -dE/dR (mx.grad). It is trained
on forces only, so every training step differentiates a gradient: value_and_grad over the
parameters of a loss that contains grad over the positions (grad of grad). The data are
disordered clusters of a Lennard-Jones system (epsilon = sigma = 1) with analytic forces.
Prints the held-out force error, the learned pair force next to the true one, and writes
forces_loss.png when matplotlib is installed.
"""
from __future__ import annotations

import argparse
from typing import Any

import numpy as np

import mirax as mx
import mirax.numpy as mnp
from mirax import nn, optim
from mirax.examples.common import add_run_args, fit, plot_curves, start_run


# --- the reference system ------------------------------------------------------------------
def lj_energy_forces(pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lennard-Jones energies [B] and forces [B, N, 3] in closed form, in float64."""
    d = pos[:, :, None, :] - pos[:, None, :, :]              # R_i - R_j
    r2 = (d ** 2).sum(-1)
    n = pos.shape[1]
    r2[:, np.arange(n), np.arange(n)] = np.inf
    inv6 = r2 ** -3
    energy = 0.5 * (4 * (inv6 ** 2 - inv6)).sum((1, 2))
    coef = 24 * (2 * inv6 ** 2 - inv6) / r2                  # -dphi/dr / r
    return energy, (coef[..., None] * d).sum(2)


def make_configs(seed: int, count: int, atoms: int, min_dist: float) -> np.ndarray:
    """Disordered clusters: atoms dropped uniformly into a box at liquid-like density, a drop
    rejected when it lands closer than min_dist to an atom already placed."""
    rng = np.random.default_rng(seed)
    side = (atoms / 0.7) ** (1 / 3)
    out = np.empty((count, atoms, 3))
    for c in range(count):
        placed = []
        while len(placed) < atoms:
            p = rng.uniform(0, side, 3)
            if all(np.linalg.norm(p - q) >= min_dist for q in placed):
                placed.append(p)
        out[c] = placed
    return out


# --- the model -----------------------------------------------------------------------------
class PairPotential(nn.Module):
    """phi(r) = MLP(exp(-((r - mu_k) / width)^2)), summed over pairs i < j."""
    mlp: nn.MLP
    centers: Any
    width: float = nn.static_field()

    def __init__(self, n_basis: int, width_size: int, r_min: float, r_max: float, *, key):
        self.mlp = nn.MLP(n_basis, 1, width_size, 2, activation=nn.silu, key=key)
        self.centers = mnp.linspace(r_min, r_max, n_basis)
        self.width = (r_max - r_min) / (n_basis - 1)

    def pair(self, r):                                       # r [...] -> phi [...]
        basis = mnp.exp(-(((r[..., None] - mx.lax.stop_gradient(self.centers))
                           / self.width) ** 2))
        return self.mlp(basis)[..., 0]

    def energy(self, pos, i_idx, j_idx):                    # pos [N, 3] -> scalar
        d = pos[i_idx] - pos[j_idx]
        r = mnp.sqrt(mnp.sum(d * d, axis=-1))
        return mnp.sum(self.pair(r))


def forces_fn(model, pos, i_idx, j_idx):
    return -mx.grad(model.energy)(pos, i_idx, j_idx)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--atoms", type=int, default=8)
    ap.add_argument("--configs", type=int, default=128, help="training configurations")
    ap.add_argument("--test-configs", type=int, default=32)
    ap.add_argument("--min-dist", type=float, default=0.9)
    ap.add_argument("--basis", type=int, default=24)
    ap.add_argument("--width", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-2)
    add_run_args(ap, "forces")
    args = ap.parse_args(argv)
    say = start_run(args)

    pos_tr = make_configs(args.seed, args.configs, args.atoms, args.min_dist)
    pos_te = make_configs(args.seed + 1000, args.test_configs, args.atoms, args.min_dist)
    _, f_tr = lj_energy_forces(pos_tr)
    e_te, f_te = lj_energy_forces(pos_te)
    f_scale = float(f_tr.std())
    i_idx, j_idx = (mnp.asarray(a.astype(np.int32)) for a in np.triu_indices(args.atoms, 1))
    iu = np.triu_indices(args.atoms, 1)
    r_all = np.linalg.norm(pos_tr[:, :, None] - pos_tr[:, None], axis=-1)[:, iu[0], iu[1]]
    say(f"forces: {args.configs} + {args.test_configs} Lennard-Jones clusters of {args.atoms} "
        f"atoms; pair distances {r_all.min():.2f}..{r_all.max():.2f}, force std {f_scale:.2f}")

    model = PairPotential(args.basis, args.width, 0.8, float(r_all.max()) + 0.2,
                          key=mx.random.key(args.seed))
    opt = optim.adam(optim.cosine_decay_schedule(args.lr, args.steps, alpha=0.02))
    state = opt.init(model)
    batched_forces = mx.vmap(forces_fn, in_axes=(None, 0, None, None))
    to32 = lambda a: mnp.asarray(a.astype(np.float32))
    ptr, ftr, pte = to32(pos_tr), to32(f_tr / f_scale), to32(pos_te)

    def loss_fn(model, pos, f_true):
        return mnp.mean((batched_forces(model, pos, i_idx, j_idx) / f_scale - f_true) ** 2)

    @mx.jit
    def step(model, state):
        loss, grads = mx.value_and_grad(loss_fn)(model, ptr, ftr)   # grad of (grad wrt pos)
        updates, state = opt.update(grads, state, model)
        return optim.apply_updates(model, updates), state, loss

    model, state, losses, seconds = fit(step, model, state, args.steps, "forces",
                                        quiet=args.quiet)

    f_pred = np.asarray(mx.jit(batched_forces)(model, pte, i_idx, j_idx), np.float64)
    rmse = float(np.sqrt(np.mean((f_pred - f_te) ** 2)))
    rel = rmse / float(f_te.std())
    # energies are learned up to a constant: compare after removing the mean offset
    e_pred = np.asarray(mx.vmap(model.energy, in_axes=(0, None, None))(pte, i_idx, j_idx))
    e_err = (e_pred - e_pred.mean()) - (e_te - e_te.mean())
    # the learned pair force -dphi/dr against the true one
    rs = np.array([0.95, 1.05, 2 ** (1 / 6), 1.3, 1.6, 2.0])
    dphi = mx.vmap(mx.grad(lambda r: model.pair(r)))(mnp.asarray(rs.astype(np.float32)))
    f_ref = 24 * (2 * rs ** -13 - rs ** -7)
    say("forces: r              " + "  ".join(f"{r:7.3f}" for r in rs))
    say("forces: learned -phi'  " + "  ".join(f"{-g:7.3f}" for g in np.asarray(dphi)))
    say("forces: LJ -phi'       " + "  ".join(f"{g:7.3f}" for g in f_ref))
    png = plot_curves(args.plot or None, {"force loss (normalized)": (
        np.arange(1, len(losses) + 1), losses)}, "pair potential fit to LJ forces",
        "mean squared force error / var(F)")
    say(f"forces: held-out force RMSE {rmse:.4f} ({rel:.1%} of the force std "
        f"{float(f_te.std()):.2f}), energy MAE up to a constant {np.abs(e_err).mean():.4f}; "
        f"{args.steps} steps in {seconds:.1f} s" + (f"; curve in {png}" if png else ""))
    return {"force_rmse": rmse, "relative_error": rel, "losses": losses, "seconds": seconds}


if __name__ == "__main__":
    main()
