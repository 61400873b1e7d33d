"""Under mpiexec -n 2: process 1 dies (argv[1] == "die") or stalls ("stall") before a
collective; process 0 must not hang: the launcher ends the job when a process dies, and
a stalled peer makes process 0 raise a TimeoutError naming psum after collective_timeout."""
import os
import sys
import time

import numpy as np

import mirax as mx

mx.config.update("collective_timeout", 2)
mx.distributed.initialize()
f = mx.pmap(lambda a: mx.lax.psum(a, "i"), axis_name="i")
f(np.ones((1, 3)))   # both alive: fine
if mx.process_index() == 1:
    if sys.argv[1] == "die":
        os._exit(3)
    time.sleep(60)
    os._exit(0)
try:
    f(np.ones((1, 3)))
except TimeoutError as e:
    print(f"TIMEOUT {e}", flush=True)
    os._exit(4)   # (MPI cannot finalize with a dead peer)
print("no error", flush=True)
sys.exit(0)
