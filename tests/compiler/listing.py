"""Helpers for the golden listing tests: the listing without source-line comments."""
import re

import numpy as np

import mirax as mx


def show(graph) -> str:
    return "\n".join(re.sub(r"\s+#.*$", "", line).rstrip() for line in str(graph).splitlines())


def f32(*shape):
    return mx.asarray(np.arange(1, 1 + int(np.prod(shape)), dtype=np.float32).reshape(shape))


def run_graph(graph, *args):
    from mirax.core import runtime
    cpu_backend = runtime.backend("cpu")
    return cpu_backend.compile(graph)(*(np.asarray(a) for a in args))
