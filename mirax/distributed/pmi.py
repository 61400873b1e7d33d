"""A process manager for MPI without an MPI launcher: what lets
`mx.distributed.initialize(coordinator_address, num_processes, process_id)` form a real MPI
world from processes started any other way (a cluster's own launcher, a shell loop, one
per container).

MPI libraries do not connect to each other alone: at MPI_Init each process asks a process
manager (mpiexec's, speaking the PMI wire protocol) for its rank and size, publishes its
address in a key-value store, waits at a barrier, and reads the others' addresses. Process
0 serves that protocol (PMI-1, the line protocol MPICH's clients speak over `PMI_PORT`) on
the coordinator's address, from a child process (`main` below: MPI_Init holds the GIL
while it waits for the answers, so a thread of process 0 could not give them); every
process points its MPI library at it (PMI_PORT, PMI_ID) before MPI
initializes. After MPI_Init the server is idle (the collectives travel over MPI itself,
as under mpiexec); it exits when every process has finalized, or its parent has gone.

Protocol (a line of `key=value` words per message): a client connects and says
`cmd=initack pmiid=<process id>`; the server answers `cmd=initack`, then `cmd=set size=`,
`cmd=set rank=`, `cmd=set debug=0`. Then requests, each answered: init, get_maxes,
get_appnum, get_my_kvsname, get_universe_size, put, get, barrier_in (answered
`cmd=barrier_out` to everyone once all have come), finalize. For MPI libraries with
MPICH's PMI-1 client; tested with the `mpich` wheel of the `distributed` extra. Open MPI
speaks PMIx only: launch it with its own mpirun.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

from mirax.core import config

KVS = "kvs_mirax"
VALLEN = 1024   # longest value a client may put (MPICH splits longer ones)


def _lines(conn):
    """The lines a client sends, as they come."""
    buf = b""
    while True:
        data = conn.recv(4096)
        if not data:
            return
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            yield line.decode()


def _words(line: str) -> dict:
    out = {}
    for w in line.split():
        k, _, v = w.partition("=")
        out[k] = v
    return out


class Server:
    """The process manager of `size` processes, listening on `port` (all interfaces)."""

    def __init__(self, port: int, size: int):
        self.size = size
        self.kvs: dict = {}
        self.lock = threading.Lock()
        self.waiting: list = []   # connections at the barrier
        self.finalized = 0
        self.sock = socket.create_server(("", port))
        self.sock.listen(size)
        threading.Thread(target=self._accept, name="mirax-pmi", daemon=True).start()

    def _accept(self):
        while True:   # (the other processes' probes connect and leave first)
            conn, _ = self.sock.accept()
            threading.Thread(target=self._serve, args=(conn,), name="mirax-pmi-client",
                             daemon=True).start()

    def _serve(self, conn):
        def say(msg):
            conn.sendall((msg + "\n").encode())
        with conn:
            for line in _lines(conn):
                w = _words(line)
                cmd = w.get("cmd")
                if cmd == "initack":
                    say("cmd=initack")
                    say(f"cmd=set size={self.size}")
                    say(f"cmd=set rank={int(w['pmiid'])}")
                    say("cmd=set debug=0")
                elif cmd == "init":
                    say("cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0")
                elif cmd == "get_maxes":
                    say(f"cmd=maxes kvsname_max=256 keylen_max=256 vallen_max={VALLEN} rc=0")
                elif cmd == "get_appnum":
                    say("cmd=appnum appnum=0 rc=0")
                elif cmd == "get_my_kvsname":
                    say(f"cmd=my_kvsname kvsname={KVS} rc=0")
                elif cmd == "get_universe_size":
                    say(f"cmd=universe_size size={self.size} rc=0")
                elif cmd == "put":
                    with self.lock:
                        self.kvs[w["key"]] = w.get("value", "")
                    say("cmd=put_result rc=0 msg=success")
                elif cmd == "get":
                    with self.lock:
                        v = self.kvs.get(w["key"])
                    say("cmd=get_result rc=-1 msg=key_not_found" if v is None else
                        f"cmd=get_result rc=0 msg=success value={v}")
                elif cmd == "barrier_in":
                    with self.lock:
                        self.waiting.append(say)
                        if len(self.waiting) == self.size:
                            everyone, self.waiting = self.waiting, []
                            for s in everyone:
                                s("cmd=barrier_out")
                elif cmd == "finalize":
                    say("cmd=finalize_ack")
                    with self.lock:
                        self.finalized += 1
                    return
                else:   # (spawn, name publishing: not offered)
                    say(f"cmd={cmd}_result rc=-1 msg=unsupported")


def serve_and_join(coordinator_address: str, num_processes: int, process_id: int):
    """Process 0 starts the process manager on the coordinator's port; every process waits
    until it listens and points its MPI library at it. Call before MPI initializes (before
    mpi4py.MPI loads)."""
    host, _, port = coordinator_address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"distributed.initialize: coordinator_address must be 'host:port', "
                         f"got {coordinator_address!r}")
    if process_id == 0:
        subprocess.Popen([sys.executable, "-c", _SERVE, port, str(num_processes),
                          str(os.getpid())])
    limit = config.get("collective_timeout") or 300
    deadline = time.monotonic() + limit
    while True:   # MPI_Init connects once: wait until the server listens
        try:
            socket.create_connection((host, int(port)), timeout=5).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"distributed.initialize: no process manager listened on "
                                   f"{coordinator_address} within {limit:.0f}s (process 0 "
                                   "starts it)") from None
            time.sleep(0.05)
    config.environ_set(PMI_PORT=f"{host}:{port}", PMI_ID=str(process_id))


def main(port: str, size: str, parent: str):
    """The server process: serves until every process has finalized or `parent` is gone."""
    server = Server(int(port), int(size))
    while server.finalized < server.size:
        time.sleep(0.5)
        try:
            os.kill(int(parent), 0)
        except OSError:
            return



_SERVE = "import sys; from mirax.distributed.pmi import main; main(*sys.argv[1:4])"
