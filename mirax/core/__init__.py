"""core: the bottom floor. dtypes and avals, pytrees (tree), errors, primitives and their
registry (primitive), the per-thread interpreter context and eager dispatch (trace),
Array, every knob (config), the runtime (Device, the Backend protocol, the registry
backends register into, the executable cache), the named-axis environment of collectives
(axes), shardings (sharding) and the profiler's recording state (profile_events). It
imports nothing else of mirax."""
