"""Collectives between processes: scripts launched with `mpiexec -n 2` (a bounded
timeout), one device per process (MPI engine) and two per process (threads + MPI). Skipped
when mpi4py or mpiexec is absent (the `distributed` extra installs both)."""
import importlib.util
import os
import shutil
import socket
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@needs_mpi
@pytest.mark.parametrize("local", ["1", "2"])
def test_collectives_across_processes_started_without_a_launcher(local):
    """initialize(coordinator_address, num_processes, process_id) in processes started as
    plain subprocesses (no mpiexec), the last one first: process 0 serves MPI's process
    manager and the three form one MPI world."""
    addr = f"127.0.0.1:{_free_port()}"
    e = dict(os.environ, PYTHONPATH=str(ROOT), MIRAX_CPU_DEVICES=local)
    for v in ("PMI_SIZE", "PMI_RANK", "PMI_PORT", "PMI_ID", "PMI_FD", "OMPI_COMM_WORLD_SIZE"):
        e.pop(v, None)
    procs = [subprocess.Popen([sys.executable, str(HERE / "mpi_collectives.py"),
                               "--no-launcher", addr, "3", str(i)], env=e, cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in (2, 1, 0)]
    outs = [p.communicate(timeout=240) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, out[-3000:] + err[-3000:]
    assert sum(out.count("ok ") for out, _ in outs) == 3, outs


def test_without_a_launcher_the_coordinator_is_required():
    r = subprocess.run([sys.executable, "-c", "import mirax as mx; "
                        "mx.distributed.initialize(num_processes=2)"],
                       env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode != 0 and "coordinator_address='host:port'" in r.stderr, r.stderr


@needs_mpi
def test_a_dead_process_ends_the_job():
    r = launch(HERE / "mpi_dead_rank.py", args=("die",), timeout=60)
    assert r.returncode != 0 and "no error" not in r.stdout, r.stdout + r.stderr


@needs_mpi
def test_a_stalled_process_times_out_naming_the_collective():
    r = launch(HERE / "mpi_dead_rank.py", args=("stall",), timeout=60)
    assert "TIMEOUT psum: timed out after 2s" in r.stdout, r.stdout + r.stderr[-2000:]
