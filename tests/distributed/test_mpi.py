"""Collectives between processes: scripts launched with `mpiexec -n 2` (a bounded
timeout), one device per process (MPI engine) and two per process (threads + MPI). Skipped
when mpi4py or mpiexec is absent (the `distributed` extra installs both)."""
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def mpiexec():
    if importlib.util.find_spec("mpi4py") is None:
        return None
    local = Path(sys.executable).parent / "mpiexec"
    return str(local) if local.exists() else shutil.which("mpiexec")


needs_mpi = pytest.mark.skipif(mpiexec() is None, reason="mpi4py / mpiexec not installed "
                               "(pip install 'mirax[distributed]')")


def launch(script, n=2, env=None, timeout=240, args=()):
    e = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    cmd = [mpiexec(), "-n", str(n), sys.executable, str(script), *args]
    return subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT)


@needs_mpi
@pytest.mark.parametrize("local", ["1", "2"])
def test_collectives_across_two_processes(local):
    r = launch(HERE / "mpi_collectives.py", env={"MIRAX_CPU_DEVICES": local})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert r.stdout.count("ok ") == 2 and "FAIL" not in r.stdout, r.stdout


@needs_mpi
def test_a_dead_process_ends_the_job():
    r = launch(HERE / "mpi_dead_rank.py", args=("die",), timeout=60)
    assert r.returncode != 0 and "no error" not in r.stdout, r.stdout + r.stderr


@needs_mpi
def test_a_stalled_process_times_out_naming_the_collective():
    r = launch(HERE / "mpi_dead_rank.py", args=("stall",), timeout=60)
    assert "TIMEOUT psum: timed out after 2s" in r.stdout, r.stdout + r.stderr[-2000:]
