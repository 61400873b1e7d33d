"""Checkpoints: a pytree of arrays <-> one safetensors file.

Where it sits: host-side I/O on top of mirax.core.tree; arrays come back as mx.Arrays on the
default device. Tensors are named by their tree path with dots (`layers.0.weight`, as in
PyTorch state dicts), so other safetensors readers see ordinary names; the tree's structure
goes in the file's metadata as JSON (key "mirax.tree"), so `load(path)` rebuilds dicts, lists,
tuples and None on its own. Custom nodes (Modules, namedtuples) need `like=`: without it
they come back as dicts of their fields. `like` is the safe way: every leaf is found by path
and its shape and dtype checked, and a mismatch names the path.

The file is written with the `safetensors` package (an optional dependency), through its
framework-free API, so bfloat16 tensors are stored as BF16 and read back as bfloat16.
"""
from __future__ import annotations

import json
import os

import numpy as np

from mirax.core import dtypes, tree
from mirax.ops.creation import asarray

__all__ = ["load", "save"]

_FORMAT_KEY = "mirax.tree"
_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": dtypes.bfloat16,
    "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8,
    "U64": np.uint64, "U32": np.uint32, "U16": np.uint16, "U8": np.uint8, "BOOL": np.bool_,
}


def _safetensors():
    try:
        import safetensors
    except ImportError:
        raise ImportError("mx.io.save/load need the `safetensors` package: "
                          "pip install safetensors (or pip install 'mirax[examples]')") from None
    return safetensors


def _entry(k) -> str:
    for attr in ("key", "idx", "name"):
        if hasattr(k, attr):
            return str(getattr(k, attr))
    return str(k)


def _name(path: tuple) -> str:
    return ".".join(_entry(k) for k in path) or "_"


def _skeleton(x, names: iter):
    """JSON-able description of the tree; a leaf is {"leaf": tensor name}."""
    if x is None:
        return None
    if isinstance(x, dict) and type(x) is dict:
        return {"dict": [[k, _skeleton(x[k], names)] for k in sorted(x)]}
    if type(x) in (list, tuple):
        return {type(x).__name__: [_skeleton(c, names) for c in x]}
    leaves_, treedef = tree.flatten(x, is_leaf=lambda y: y is not x)
    if len(leaves_) == 1 and leaves_[0] is x:   # a leaf (a childless node is not)
        return {"leaf": next(names)}
    keys = [_entry(p[0]) for p, _ in tree.leaves_with_path(
        x, is_leaf=lambda y: y is not x)]
    return {"node": type(x).__name__, "keys": keys,
            "children": [_skeleton(c, names) for c in leaves_]}


def _rebuild(s, tensors: dict):
    if s is None:
        return None
    if "leaf" in s:
        return tensors[s["leaf"]]
    if "dict" in s:
        return {k: _rebuild(c, tensors) for k, c in s["dict"]}
    if "list" in s:
        return [_rebuild(c, tensors) for c in s["list"]]
    if "tuple" in s:
        return tuple(_rebuild(c, tensors) for c in s["tuple"])
    return {k: _rebuild(c, tensors) for k, c in zip(s["keys"], s["children"])}


def save(path, tree_) -> None:
    """Write the arrays of a pytree to `path` (a .safetensors file)."""
    st = _safetensors()
    pairs = tree.leaves_with_path(tree_)
    names = [_name(p) for p, _ in pairs]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ValueError(f"io.save: tree paths collide as tensor names: {sorted(dup)}")
    arrays = {}
    for n, (p, leaf) in zip(names, pairs):
        a = np.require(np.asarray(leaf), requirements="C")   # keeps 0-d arrays 0-d
        if a.dtype.name not in {np.dtype(d).name for d in _DTYPES.values()}:
            raise TypeError(f"io.save: leaf {tree.keystr(p) or 'the root'} has dtype "
                            f"{a.dtype}, which safetensors cannot store")
        arrays[n] = a
    meta = {_FORMAT_KEY: json.dumps(_skeleton(tree_, iter(names)))}
    specs = {n: st.TensorSpec(dtype=a.dtype.name, shape=list(a.shape), data_ptr=a.ctypes.data,
                              data_len=a.nbytes) for n, a in arrays.items()}
    st.serialize_file(specs, os.fspath(path), metadata=meta)


def _read(path) -> tuple[dict, dict]:
    st = _safetensors()
    with open(path, "rb") as f:
        data = f.read()
    n = int.from_bytes(data[:8], "little")
    meta = json.loads(data[8:8 + n]).get("__metadata__") or {}
    out = {}
    for name, view in st.deserialize(data):
        if view["dtype"] not in _DTYPES:
            raise TypeError(f"io.load: tensor {name!r} has dtype {view['dtype']}, "
                            "which mirax does not support")
        arr = np.frombuffer(view["data"], dtype=_DTYPES[view["dtype"]])
        out[name] = arr.reshape(view["shape"]).copy()
    return out, meta


def load(path, like=None):
    """Read a checkpoint written by `save` (or any safetensors file). With `like` (a pytree
    of arrays or of anything with .shape and .dtype) the result has like's structure and every
    leaf's shape and dtype is checked; without it the structure comes from the file."""
    raw, meta = _read(path)
    if like is None:
        tensors = {k: asarray(v) for k, v in raw.items()}
        if _FORMAT_KEY not in meta:
            return tensors                 # a foreign file: its flat name -> array dict
        return _rebuild(json.loads(meta[_FORMAT_KEY]), tensors)
    pairs = tree.leaves_with_path(like)
    treedef = tree.structure(like)
    leaves, used = [], set()
    for p, ref in pairs:
        where, name = tree.keystr(p) or "the root", _name(p)
        if name not in raw:
            raise ValueError(f"io.load: {path}: no tensor for {where} (looked for {name!r}; "
                             f"the file has {sorted(raw)[:8]})")
        arr = raw[name]
        used.add(name)
        want_shape, want_dtype = tuple(np.shape(ref)), np.dtype(getattr(ref, "dtype", None)
                                                                  or np.asarray(ref).dtype)
        if arr.shape != want_shape or arr.dtype != want_dtype:
            raise ValueError(f"io.load: {path}: {where} is {_short(arr.dtype, arr.shape)} in "
                             f"the file but {_short(want_dtype, want_shape)} in `like`")
        leaves.append(asarray(arr))
    extra = sorted(set(raw) - used)
    if extra:
        raise ValueError(f"io.load: {path}: tensors {extra[:8]} in the file have no place in "
                         "`like`")
    return tree.unflatten(treedef, leaves)


def _short(dtype, shape) -> str:
    return f"{dtypes.short_name(dtype)}{list(shape)}".replace(" ", "")
