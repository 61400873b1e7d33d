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

Robustness: `save` writes a temporary file beside the target and renames it into place (a
crash never leaves a half-written checkpoint under the target's name), and removes the
temporaries of the same target that a killed save left behind. `load` reads the format
itself and checks everything before trusting it: a truncated or corrupt file, a header whose
sizes disagree with its data, or a tree whose recorded dtype or shape disagrees with the
header raises a ValueError naming io.load and the file.
"""
from __future__ import annotations

import glob
import json
import math
import os
import uuid

import numpy as np

from mirax.core import dtypes, tree
from mirax.ops.creation import asarray

__all__ = ["load", "save"]

_FORMAT_KEY = "mirax.tree"
# safetensors has no complex dtype: a complex tensor of shape S is stored as its real parts
# (f32 for c64, f64 for c128) of shape S + (2,) = (real, imaginary), bit for bit, and its name
# is listed under this metadata key so load gives the complex array back
_COMPLEX_KEY = "mirax.complex"
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
        a = np.asarray(x)   # its dtype and shape, checked against the header by load
        return {"leaf": next(names), "dtype": _ST_NAMES.get(a.dtype.name),
                "shape": list(a.shape)}
    keys = [_entry(p[0]) for p, _ in tree.leaves_with_path(
        x, is_leaf=lambda y: y is not x)]
    return {"node": type(x).__name__, "keys": keys,
            "children": [_skeleton(c, names) for c in leaves_]}


def _rebuild(s, tensors: dict):
    if s is None:
        return None
    if "leaf" in s:
        t = tensors[s["leaf"]]
        if "dtype" in s and (s["dtype"] != _ST_NAMES.get(np.dtype(t.dtype).name)
                             or list(s["shape"]) != list(t.shape)):
            raise ValueError(f"tensor {s['leaf']!r} is {_short(t.dtype, t.shape)} in the header "
                             f"but was saved as {s['dtype']}{list(s['shape'])}")
        return t
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
    arrays, complex_names = {}, []
    for n, (p, leaf) in zip(names, pairs):
        a = np.require(np.asarray(leaf), requirements="C")   # keeps 0-d arrays 0-d
        if a.dtype.kind == "c" and a.dtype in dtypes.COMPLEXES:
            complex_names.append(n)
            a = np.stack([a.real, a.imag], axis=-1)  # exact: the parts as they are
        if a.dtype.name not in {np.dtype(d).name for d in _DTYPES.values()}:
            raise TypeError(f"io.save: leaf {tree.keystr(p) or 'the root'} has dtype "
                            f"{a.dtype}, which safetensors cannot store")
        arrays[n] = a
    meta = {_FORMAT_KEY: json.dumps(_skeleton(tree_, iter(names)))}
    if complex_names:
        meta[_COMPLEX_KEY] = json.dumps(complex_names)
    specs = {n: st.TensorSpec(dtype=a.dtype.name, shape=list(a.shape), data_ptr=a.ctypes.data,
                              data_len=a.nbytes) for n, a in arrays.items()}
    target = os.fspath(path)
    _remove_stale_temporaries(target)
    tmp = f"{target}{_TMP_TAG}{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        st.serialize_file(specs, tmp, metadata=meta)
        os.replace(tmp, target)   # atomic: the target is the old file or the whole new one
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


_TMP_TAG = ".mirax-tmp-"
_ST_NAMES = {np.dtype(d).name: k for k, d in _DTYPES.items()}


def _remove_stale_temporaries(target: str) -> None:
    """Delete `target`'s temporaries whose writing process is gone (a save killed midway)."""
    for tmp in glob.glob(glob.escape(target) + _TMP_TAG + "*"):
        try:
            pid = int(tmp[len(target) + len(_TMP_TAG):].split("-")[0])
            os.kill(pid, 0)            # raises if no such process
        except ProcessLookupError:
            try:
                os.remove(tmp)
            except OSError:
                pass
        except (ValueError, PermissionError, OSError):
            continue                   # not ours, or a live process of another user


def _corrupt(path, why: str) -> ValueError:
    return ValueError(f"io.load: {os.fspath(path)} is not a readable checkpoint: {why}")


def _read(path) -> tuple[dict, dict]:
    """The tensors and metadata of a safetensors file, every size checked first."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise FileNotFoundError(f"io.load: no such file: {os.fspath(path)}") from None
    if len(data) < 8:
        raise _corrupt(path, f"{len(data)} bytes, too short for the header length")
    n = int.from_bytes(data[:8], "little")
    body = len(data) - 8 - n
    if body < 0:
        raise _corrupt(path, f"a header of {n} bytes in a file of {len(data)} (truncated?)")
    try:
        header = json.loads(data[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _corrupt(path, f"the header is not JSON ({e})") from None
    if not isinstance(header, dict):
        raise _corrupt(path, "the header is not a JSON object")
    meta = header.pop("__metadata__", None) or {}
    out = {}
    for name, info in header.items():
        out[name] = _tensor(path, name, info, data, 8 + n, body)
    # complex tensors are stored as (real, imaginary) pairs along a last axis of 2
    for name in json.loads(meta.get(_COMPLEX_KEY, "[]")):
        arr = out[name]
        z = np.empty(arr.shape[:-1], dtypes.complex_dtype(arr.dtype))
        z.real, z.imag = arr[..., 0], arr[..., 1]
        out[name] = z
    return out, meta


def _tensor(path, name, info, data, start, body):
    try:
        code, shape, (lo, hi) = info["dtype"], [int(d) for d in info["shape"]], \
            [int(o) for o in info["data_offsets"]]
    except (TypeError, KeyError, ValueError):
        raise _corrupt(path, f"tensor {name!r} has a malformed header entry {info!r:.80}") \
            from None
    if code not in _DTYPES:
        raise TypeError(f"io.load: {os.fspath(path)}: tensor {name!r} has dtype {code}, "
                        "which mirax does not support")
    dtype = np.dtype(_DTYPES[code])
    want = math.prod(shape) * dtype.itemsize
    if min(shape, default=0) < 0 or not 0 <= lo <= hi <= body:
        raise _corrupt(path, f"tensor {name!r} lies at bytes {lo}..{hi} of a data section of "
                             f"{body} (truncated?)")
    if hi - lo != want:
        raise _corrupt(path, f"tensor {name!r} is {code}{shape} ({want} bytes) in the header "
                             f"but holds {hi - lo} bytes")
    return np.frombuffer(data, dtype, math.prod(shape), start + lo).reshape(shape).copy()


def load(path, like=None):
    """Read a checkpoint written by `save` (or any safetensors file). With `like` (a pytree
    of arrays or of anything with .shape and .dtype) the result has like's structure and every
    leaf's shape and dtype is checked; without it the structure comes from the file."""
    raw, meta = _read(path)
    if like is None:
        tensors = {k: asarray(v) for k, v in raw.items()}
        if _FORMAT_KEY not in meta:
            return tensors                 # a foreign file: its flat name -> array dict
        try:
            return _rebuild(json.loads(meta[_FORMAT_KEY]), tensors)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            detail = f"no tensor {e}" if isinstance(e, KeyError) else str(e)
            raise _corrupt(path, f"its tree metadata does not fit its tensors ({detail})") \
                from None
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
