"""Under mpiexec: a few data-parallel charlm steps; process 0 prints the losses as JSON
and saves the checkpoint to argv[1]."""
import json
import sys

import mirax as mx
from mirax.examples import charlm

ARGS = ("--steps 4 --batch 8 --context 16 --dim 32 --layers 1 --heads 2 --eval-batches 1 "
        "--sample-chars 2 --plot= --quiet --data-parallel --checkpoint").split()
r = charlm.main(ARGS + [sys.argv[1]])
if mx.process_index() == 0:
    print("LOSSES " + json.dumps(r["train_losses"]), flush=True)
