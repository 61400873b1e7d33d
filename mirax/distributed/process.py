"""The process group: which process this is, how many there are, and the MPI communicator
between them.

`initialize()` reads an MPI launcher (`mpiexec -n 4 python train.py`): rank and size from
MPI (mpi4py, the optional extra `distributed`). Launched without one, it is a group of one.
`coordinator_address / num_processes / process_id` state the group explicitly: under an
MPI launcher they must agree with its world; without one (processes started any other
way) process 0 serves MPI's process manager on the coordinator's address (pmi.py) and
the processes form an MPI world through it. Either way the collectives between processes
travel over MPI.

Where it sits: distributed/, above the backends, below the public faces.
"""
from __future__ import annotations

import sys
import threading

from mirax.core import config
from mirax.distributed import pmi

_lock = threading.Lock()


class _Group:
    def __init__(self):
        self.initialized = False
        self.rank = 0
        self.size = 1
        self.comm = None          # mpi4py COMM_WORLD when size > 1
        self.local_counts = None  # local device count of every process


group = _Group()


def _launcher_size() -> int | None:
    """The world size an MPI launcher announced in the environment (None: no launcher)."""
    for var in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS", "PMIX_SIZE"):
        v = config.environ_get(var)
        if v:
            return int(v)
    return None


def mpi():
    """mpi4py's MPI module, or an ImportError saying how to install it."""
    try:
        from mpi4py import MPI   # optional dependency (the `distributed` extra)
    except ImportError as e:
        raise ImportError("mirax.distributed: collectives between processes need mpi4py and "
                          "an MPI library: pip install 'mirax[distributed]'") from e
    return MPI


def initialize(coordinator_address: str | None = None, num_processes: int | None = None,
               process_id: int | None = None, local_device_count: int | None = None):
    """Join the process group. With no arguments: from the MPI launcher (or a group of one
    when there is none). Idempotent."""
    with _lock:
        if group.initialized:
            return
        launched = _launcher_size()
        if launched is None and num_processes in (None, 1):
            group.initialized = True
            return
        if launched is None:   # no MPI launcher: process 0 serves MPI's process manager
            _join_without_launcher(coordinator_address, num_processes, process_id)
        MPI = mpi()
        comm = MPI.COMM_WORLD
        rank, size = comm.Get_rank(), comm.Get_size()
        if num_processes is not None and num_processes != size or \
                process_id is not None and process_id != rank:
            raise RuntimeError(
                f"distributed.initialize: asked for process {process_id} of {num_processes} "
                f"(coordinator {coordinator_address!r}) but the MPI world here is process "
                f"{rank} of {size} (the MPI launcher's): leave the arguments out under "
                "mpiexec, or state them all and start the processes without it")
        group.rank, group.size, group.comm = rank, size, comm
        n_local = local_device_count
        if n_local is None:
            n_local = config.get("cpu_devices") if config.get("device") == "cpu" else 1
        group.local_counts = comm.allgather(max(1, int(n_local)))
        if len(set(group.local_counts)) != 1:
            raise RuntimeError("distributed.initialize: every process must have the same "
                               f"number of local devices; got {group.local_counts}")
        group.initialized = True


def _join_without_launcher(coordinator_address, num_processes, process_id):
    if coordinator_address is None or process_id is None:
        raise ValueError(
            f"distributed.initialize: {num_processes} processes without an MPI launcher "
            "need coordinator_address='host:port' (where process 0 listens) and "
            f"process_id (0..{num_processes - 1}); got coordinator_address="
            f"{coordinator_address!r}, process_id={process_id!r}")
    if not 0 <= process_id < num_processes:
        raise ValueError(f"distributed.initialize: process_id {process_id} is not in "
                         f"0..{num_processes - 1}")
    if "mpi4py.MPI" in sys.modules and sys.modules["mpi4py.MPI"].Is_initialized():
        raise RuntimeError("distributed.initialize: MPI was initialized before it (mpi4py.MPI "
                           "was imported) as a group of one; call initialize() first")
    pmi.serve_and_join(coordinator_address, num_processes, process_id)


def process_index() -> int:
    return group.rank


def process_count() -> int:
    return group.size


def shutdown():
    """Leave the group (tests; a new initialize() reads the launcher again)."""
    with _lock:
        group.__init__()
