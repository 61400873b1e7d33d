"""The bad-input sweep behind tests/core/test_bad_inputs.py: every public function of
mirax.numpy (and .linalg), mirax.lax, mirax.nn, mirax.random, mirax.optim, mirax.io and the
transforms (the callables of `mirax` itself), called with one argument replaced by a bad
value, eagerly and (for array-valued bad values) inside `jit`.

The functions are enumerated from the modules (`__all__` where a module has one, else its
public `dir()`), minus EXCLUDED below, so a new function is covered without editing this
file. Every argument that is not the bad one gets a filler chosen by the parameter's name
(FILLERS); the call may then succeed (a bad value can be valid: -1 as an axis) or raise.
What is asserted is the way it fails:

- "ok": a TypeError or ValueError whose message contains the public name (the contract:
  API.md "Errors"; mirax.core.errors.ShapeError / DTypeError are both);
- "names another op": a TypeError / ValueError that does not name the function;
- "internal": any other exception (AttributeError from inside mirax, NumPy's LinAlgError,
  ZeroDivisionError, ...): the call ended in NumPy or Python internals;
- "accepted": no error (not a failure: the value may be valid there);
- "unsupported": NotImplementedError naming the function (a valid request mirax lacks).
IndexError and FileNotFoundError naming the function count as "ok" (NumPy's, JAX's and
Python's classes for an index out of bounds and a missing file).
"""
from __future__ import annotations

import importlib
import inspect
import os
import re
import tempfile
from dataclasses import dataclass, field

import numpy as np

import mirax as mx
import mirax.numpy as mnp
from mirax.core.array import ArrayOps

MODULES = ("numpy", "numpy.linalg", "lax", "nn", "random", "optim", "io")

# Names of a public module that are not functions of its API: helpers the module imports for
# its own use (they are tested where they live), and functions that take no arguments or
# any Python object by design.
EXCLUDED = {
    "random": {"asarray", "operand", "short", "static_int", "static_shape", "normalize_axis",
               "sort"},
    "nn": {"static_field"},  # a dataclass field marker: keyword arguments only
    "": {"Array", "ShapeDtypeStruct", "custom_jvp", "custom_vjp",  # classes
         "devices", "default_device",  # no arguments
         "ensure_compile_time_eval"},  # a context manager taking no arguments
    # helpers of mirax.ops.common that `from ... import *` leaks into mirax.numpy
    "numpy": {"operand", "float_operand", "normalize_axes", "normalize_axis", "promote",
              "short", "static_int", "static_shape"},
}


def public_functions():
    """[(qualified name, public name, function)] over MODULES and the top-level mirax.
    Aliases (one function under several names, as mnp.abs / mnp.absolute) each appear; an
    error naming any of a function's public names names it (ALIASES)."""
    out = []
    for mname in MODULES + ("",):
        m = importlib.import_module("mirax" + ("." + mname if mname else ""))
        names = getattr(m, "__all__", None) or [n for n in dir(m) if not n.startswith("_")]
        for n in sorted(names):
            f = getattr(m, n, None)
            if f is None or n in EXCLUDED.get(mname, ()) or inspect.ismodule(f) or \
                    inspect.isclass(f) or not callable(f):
                continue
            mod = getattr(f, "__module__", None) or ""
            if not mod.startswith("mirax"):  # re-exported NumPy / math objects (dtypes ...)
                continue
            out.append((f"{mname}.{n}" if mname else n, n, f))
            ALIASES.setdefault(id(f), set()).add(n)
    return out


ALIASES: dict = {}  # id(function) -> its public names


class Opaque:
    """An object no function should take as an array, shape, axis or dtype."""

    def __repr__(self):
        return "Opaque()"


# one slot's bad values: (label, value, array-valued so that jit can take it)
BAD = [
    ("opaque", Opaque(), False),
    ("none", None, False),
    ("str", "a", False),
    ("ragged", [[1.0, 2.0], [3.0]], False),
    ("frac", 2.5, False),
    ("neg", -1, False),
    ("zero", 0, False),
    ("rank6", None, True),      # filled in by bad_values(): arrays need mirax at call time
    ("bool", None, True),
    ("empty", None, True),
]


def bad_values():
    arrays = {"rank6": mnp.ones((1, 1, 1, 1, 1, 2)), "bool": mnp.array([True, False]),
              "empty": mnp.ones((0,))}
    return [(lab, arrays.get(lab, v), is_arr) for lab, v, is_arr in BAD]


def _square():
    return mnp.array(np.eye(4, dtype=np.float32) * 2 + 0.25)


_TMP = tempfile.mkdtemp(prefix="mirax_badinputs_")

# filler by parameter name (everything else: a float32 4x4 matrix with entries in (0, 2.5))
FILLERS = {
    **dict.fromkeys(["key", "k0", "k1"], lambda: mx.random.key(0)),
    **dict.fromkeys(["n", "N", "k", "kth", "num_segments", "num_classes", "num_rows", "ndim",
                     "rank", "deg", "dimension", "M", "num", "bits"], lambda: 2),
    **dict.fromkeys(["axis", "axis1", "start_dimension", "source", "destination", "index",
                     "start_index", "lower", "which"], lambda: 0),
    "axis2": lambda: 1,
    "axes": lambda: (0,),
    **dict.fromkeys(["shape", "size_or_shape", "new_shape", "sizes", "new_sizes", "dims",
                     "slice_sizes", "window_shape", "window_dimensions", "kernel_size",
                     "lhs_shape", "rhs_shape", "filter_shape", "in_shape", "reps",
                     "dimensions", "limit_indices"], lambda: (2, 2)),
    **dict.fromkeys(["indices", "idx", "ids", "segment_ids", "labels", "ind", "idxs",
                     "start_indices", "indices_or_sections", "repeats", "shift", "bins",
                     "multi_index"], lambda: mnp.array([0, 1, 1, 0])),
    **dict.fromkeys(["f", "func", "fn", "fun", "function", "func1d", "pyfunc", "body_fun",
                     "computation", "true_fun", "false_fun", "op"], lambda: _identity),
    "cond_fun": lambda: (lambda *a: False),
    **dict.fromkeys(["branches", "funclist"], lambda: [_identity, _identity]),
    **dict.fromkeys(["dtype", "new_dtype"], lambda: mnp.float32),
    **dict.fromkeys(["learning_rate", "scale", "rate", "max_norm", "value", "decay_rate",
                     "end_value", "step_size", "decay", "peak_value", "alpha", "lam",
                     "minval", "maxval", "df", "dfnum", "dfden", "concentration", "loc",
                     "init_value", "fill_value", "padding_value", "zero_point", "p",
                     "start", "stop", "upper", "limit", "min", "max", "pred",
                     "exponent_bits", "mantissa_bits", "val"], lambda: 0.5),
    **dict.fromkeys(["decay_steps", "transition_steps", "warmup_steps"], lambda: 10),
    "path": lambda: os.path.join(_TMP, "ckpt.safetensors"),
    "subscripts": lambda: "ij->ji",
    **dict.fromkeys(["params", "tree_", "updates", "grads"], lambda: {"w": mnp.ones(3)}),
    "padding": lambda: "SAME",
    **dict.fromkeys(["window_strides", "strides", "lhs_dilation", "rhs_dilation"],
                    lambda: (1, 1)),
    **dict.fromkeys(["arrays", "tup", "xs", "operands", "condlist", "choicelist", "elems",
                     "init_values"], lambda: [mnp.ones((2, 2)), mnp.ones((2, 2))]),
    **dict.fromkeys(["primals", "tangents"], lambda: (mnp.ones(3),)),
}


def _identity(*a, **k):
    return a[0] if a else 0.0


def filler(param: str):
    make = FILLERS.get(param)
    return make() if make is not None else _square()


# the bad values tried on optional parameters too (full sweep): a keyword left at its
# default is filled by it, so only the value under test changes
OPTIONAL_BAD = ("opaque", "frac", "zero", "str")


def optional_params(f) -> list[str]:
    """f's parameters that have defaults (positional-or-keyword or keyword-only)."""
    try:
        sig = inspect.signature(f)
    except (TypeError, ValueError):
        return []
    return [p.name for p in sig.parameters.values()
            if p.default is not inspect.Parameter.empty
            and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def slots(f) -> tuple[list[str], list]:
    """The required positional parameters of f (their names) and filler values for them."""
    try:
        sig = inspect.signature(f)
    except (TypeError, ValueError):
        return ["x"], [_square()]
    names = [p.name for p in sig.parameters.values()
             if p.default is inspect.Parameter.empty
             and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if not names:  # only optional parameters (or *args): fuzz the first one
        names = [p.name for p in sig.parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)][:1]
    return names, [filler(n) for n in names]


@dataclass
class Outcome:
    qual: str
    slot: str
    bad: str
    mode: str
    kind: str           # ok | accepted | unsupported | other-op | internal
    detail: str = ""


@dataclass
class Tally:
    outcomes: list = field(default_factory=list)

    def add(self, o: Outcome):
        self.outcomes.append(o)

    def count(self, kind):
        return sum(o.kind == kind for o in self.outcomes)

    def failures(self):
        return [o for o in self.outcomes if o.kind in ("other-op", "internal")]

    def summary(self) -> str:
        funcs = len({o.qual for o in self.outcomes})
        return (f"bad-input sweep: {len(self.outcomes)} cases over {funcs} functions: "
                f"{self.count('ok')} clear errors naming the function, "
                f"{self.count('accepted')} accepted, {self.count('unsupported')} unsupported, "
                f"{self.count('other-op')} naming another "
                f"op, {self.count('internal')} ending in NumPy/Python internals")


def names(msg: str, name: str, f=None) -> bool:
    """Whether msg names the function (as a word: `ne` must not match inside `none`), by
    this public name or another of the same function's (an alias)."""
    return any(re.search(rf"(?<![\w]){re.escape(n)}(?!\w)", msg) is not None
               for n in {name} | ALIASES.get(id(f), set()))


def classify(name: str, fn, f=None) -> tuple[str, str]:
    try:
        out = fn()
        if hasattr(out, "block_until_ready"):
            out.block_until_ready()
    except (TypeError, ValueError) as e:
        msg = str(e)
        if type(e).__module__.startswith("numpy"):  # LinAlgError, UFuncTypeError, ...
            return "internal", f"{type(e).__name__}: {msg[:200]}"
        if names(msg, name, f):
            return "ok", ""
        return "other-op", f"{type(e).__name__}: {msg[:200]}"
    except (IndexError, FileNotFoundError) as e:  # NumPy's / Python's own classes for these
        if names(str(e), name, f) and not type(e).__module__.startswith("numpy"):
            return "ok", ""
        return "internal", f"{type(e).__name__}: {str(e)[:200]}"
    except NotImplementedError as e:  # a valid request mirax does not support, said so
        if names(str(e), name, f):
            return "unsupported", ""
        return "internal", f"{type(e).__name__}: {str(e)[:200]}"
    except Exception as e:  # noqa: BLE001 - the point is to see every other kind
        return "internal", f"{type(e).__name__}: {str(e)[:200]}"
    return "accepted", ""


def sweep(functions, bad=None, jit=True, only_first_slot=False, eager=True,
          optional=False) -> Tally:
    """Run the sweep over `functions` ([(qual, name, f)]) and return the tally."""
    import warnings
    tally = Tally()
    bad = bad if bad is not None else bad_values()
    cwd = os.getcwd()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        os.chdir(_TMP)  # a bad path ("a") must not land in the checkout
        try:
            _sweep(functions, bad, jit, only_first_slot, eager, tally)
            if optional:
                _sweep_optional(functions, bad, tally)
        finally:
            os.chdir(cwd)
    return tally


def _sweep(functions, bad, jit, only_first_slot, eager, tally):
    for qual, name, f in functions:
        params, fill = slots(f)
        for i, slot in enumerate(params[:1] if only_first_slot else params):
            for label, value, is_arr in bad:
                args = list(fill)
                args[i] = value
                if eager or not is_arr:
                    kind, detail = classify(name, lambda: f(*args), f)
                    tally.add(Outcome(qual, slot, label, "eager", kind, detail))
                if jit and is_arr:
                    kind, detail = classify(name, lambda: _jitted(f, args), f)
                    tally.add(Outcome(qual, slot, label, "jit", kind, detail))


def _sweep_optional(functions, bad, tally):
    """Each optional parameter, by keyword, with the OPTIONAL_BAD values (eager)."""
    bad = [b for b in bad if b[0] in OPTIONAL_BAD]
    for qual, name, f in functions:
        _, fill = slots(f)
        for kw in optional_params(f):
            for label, value, _ in bad:
                kind, detail = classify(name, lambda: f(*fill, **{kw: value}), f)
                tally.add(Outcome(qual, kw, label, "eager", kind, detail))


# transforms whose returned function is called with the bad value: T(good)(bad) must fail
# naming T, or square: a pytree (None, a list) reaches the user's function as it is, and
# then the user's own op, mnp.square, is the one to name
TRANSFORMED = ("grad", "value_and_grad", "jacfwd", "jacrev", "hessian", "vmap", "jit",
               "checkpoint", "remat", "make_graph")


def _good(x):
    return mnp.sum(mnp.square(x))


def sweep_transformed(bad=None) -> Tally:
    tally = Tally()
    for name in TRANSFORMED:
        t = getattr(mx, name)
        for label, value, _ in bad if bad is not None else bad_values():
            kind, detail = classify(name, lambda: t(_good)(value), t)
            if kind == "other-op" and names(detail, "square"):
                kind = "ok"
            tally.add(Outcome(name + "(f)(...)", "x", label, "eager", kind, detail))
    return tally


def _jitted(f, args):
    """f(*args) under jit, its array arguments traced (the rest closed over)."""
    pos = [i for i, a in enumerate(args) if isinstance(a, mx.Array)]

    def g(*arrs):
        full = list(args)
        for i, a in zip(pos, arrs):
            full[i] = a
        out = f(*full)  # the array leaves of the result (a dtype or a function: dropped)
        return [o for o in mx.tree.leaves(out) if isinstance(o, ArrayOps)]
    return mx.jit(g)(*[args[i] for i in pos])
