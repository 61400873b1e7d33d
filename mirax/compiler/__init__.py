"""compiler: one ordered list of Graph -> Graph passes (pipeline.py: decompose per the
backend's claims, simplify, cse, dce, fuse, the backend's own passes, plan_memory), one
file per pass. It sits above the transforms and below the backends; importing it
registers the pipeline with the runtime (core/runtime.py), which runs it before handing
a graph to a backend's `compile`."""
from mirax.compiler.pipeline import optimize

__all__ = ["optimize"]
