"""The examples run end to end at tiny sizes (a few seconds each) and learn something."""
import builtins
import os

import numpy as np
import pytest

from mirax.examples import charlm, common, forces, gnn, mlp_digits


def test_charlm_tiny_beats_unigram_entropy():
    res = charlm.main(["--steps", "80", "--batch", "8", "--context", "24", "--dim", "32",
                       "--heads", "2", "--layers", "1", "--lr", "1e-2", "--eval-batches", "2",
                       "--sample-chars", "8", "--plot", "", "--quiet"])
    assert len(res["sample"]) == 8
    assert np.isfinite(res["train_losses"]).all()
    assert res["loss"] < res["unigram_entropy"], res["loss"]


def test_charlm_text_and_entropy():
    text = charlm.load_text()
    assert text.startswith("THE FIRST BOOK OF MOSES") and 150_000 < len(text) < 300_000
    ids = np.array([0, 0, 1, 1])
    assert charlm.unigram_entropy(ids, 2) == pytest.approx(np.log(2))


def test_mlp_digits_tiny():
    x, y = mlp_digits.load_digits()
    assert x.shape == (1797, 64) and set(np.unique(y)) == set(range(10))
    res = mlp_digits.main(["--steps", "150", "--plot", "", "--quiet"])
    assert res["test_accuracy"] > 0.9


def test_gnn_tiny_and_data():
    assert len(gnn.EDGES) == 78 and len({tuple(e) for e in gnn.EDGES}) == 78
    assert gnn.LABELS.sum() == 17
    deg = np.bincount(gnn.EDGES.ravel(), minlength=34)
    assert deg[0] == 16 and deg[33] == 17          # the instructor's and administrator's
    res = gnn.main(["--steps", "60", "--plot", "", "--quiet"])
    assert res["accuracy"] >= 0.8


def test_forces_tiny_and_reference():
    pos = forces.make_configs(0, 2, 4, 0.9)
    e, f = forces.lj_energy_forces(pos)
    # finite-difference check of the closed-form forces
    eps, i, k = 1e-6, 1, 2
    p1, p2 = pos.copy(), pos.copy()
    p1[0, i, k] += eps
    p2[0, i, k] -= eps
    fd = -(forces.lj_energy_forces(p1)[0][0] - forces.lj_energy_forces(p2)[0][0]) / (2 * eps)
    assert f[0, i, k] == pytest.approx(fd, rel=1e-5, abs=1e-6)
    np.testing.assert_allclose(f.sum(1), 0, atol=1e-9)          # Newton's third law
    res = forces.main(["--steps", "60", "--configs", "24", "--test-configs", "8",
                       "--plot", "", "--quiet"])
    assert res["relative_error"] < 0.3


def test_progress_without_tqdm_and_plot(tmp_path, monkeypatch, capsys):
    real_import = builtins.__import__

    def no_tqdm(name, *a, **k):
        if name.startswith("tqdm"):
            raise ImportError(name)
        return real_import(name, *a, **k)
    monkeypatch.setattr(builtins, "__import__", no_tqdm)
    bar = common.Progress(4, "demo", every=2)
    for i in bar:
        bar.set(loss=float(i))
    out = capsys.readouterr().out
    assert "demo: step 2/4  loss 1.0000" in out and "demo: step 4/4" in out
    monkeypatch.setattr(builtins, "__import__", real_import)
    pytest.importorskip("matplotlib")
    path = common.plot_curves(tmp_path / "c.png", {"a": ([1, 2], [3.0, 2.0])}, "t",
                              hlines={"ref": 2.5})
    assert os.path.getsize(path) > 1000


def test_burgers_inverse_tiny():
    """Gradient descent through the FFT time-stepper recovers the initial condition."""
    from mirax.examples import burgers_inverse
    res = burgers_inverse.main(["--grid", "32", "--modes", "5", "--steps", "30", "--every",
                                "10", "--iters", "60", "--plot", "", "--quiet"])
    assert res["losses"][-1] < 1e-3 * res["losses"][0]
    assert res["relative_error"] < 0.05
    # the rollout conserves the mean (the k = 0 mode) and matches a NumPy reference step
    roll = burgers_inverse.make_solver(16, 0.1, 0.01, 1, 1)
    z = np.array([0, 0.3 + 0.2j, -0.1j], np.complex64)
    u0_hat = np.asarray(burgers_inverse.initial_hat(burgers_inverse.mnp.asarray(z), 16))
    u1 = np.asarray(roll(u0_hat))[0]
    k = np.fft.rfftfreq(16, 1 / 16)
    d, keep = np.exp(-0.1 * k ** 2 * 0.01), k < 16 / 3

    def nl(uh):
        u = np.fft.irfft(uh, n=16)
        return -0.5j * k * keep * np.fft.rfft(u * u)
    n1 = nl(u0_hat)
    want = d * u0_hat + 0.005 * (d * n1 + nl(d * (u0_hat + 0.01 * n1)))
    np.testing.assert_allclose(u1, np.fft.irfft(want, n=16), rtol=1e-4, atol=1e-6)
    assert abs(u1.mean()) < 1e-6
