"""The interpreters: forward mode (jvp.py), reverse mode on a tape (vjp.py) and batching
(vmap.py), each a `Trace` with its `Tracer` and a `*_flat` driver on flat lists.

Where they sit: above core (the interpreter context, bind) and graph (staging), below ops:
primitives' rules, including the control-flow ones that transform sub-graphs, call these
drivers, and the interpreters reach the few wrappers they need (add, full, moving axes)
through `core.trace.wrappers`. The public transforms (mirax/transforms/) are thin
faces on top."""
