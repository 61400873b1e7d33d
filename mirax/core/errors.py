"""Errors users see. Messages name the operation, what was expected and what came."""
import functools
import inspect
import os
import re
import types


class MiraxError(Exception):
    pass


class ConcretizationError(MiraxError, TypeError):
    """A concrete Python value (bool, int, float, shape) was asked of a traced value."""


class UnexpectedTracerError(MiraxError):
    """A value traced in a transform escaped it and was used after the transform ended."""


class ShapeError(MiraxError, TypeError, ValueError):
    """Operands whose shapes (or ranks) do not fit the operation.

    JAX raises TypeError for these and NumPy ValueError; code written for either catches
    its own class, so this error is both."""


class UnboundAxisError(MiraxError, NameError, ValueError):
    """A collective names an axis that no vmap / pmap / shard_map around it binds (JAX
    raises NameError; a ValueError too, the class the API promises for a bad value)."""


class DTypeError(MiraxError, TypeError, ValueError):
    """Operands whose dtypes do not fit the operation (a TypeError and a ValueError, as
    ShapeError)."""


# JAX's names for the concretization errors (jax.errors.*), so `except
# jax.errors.TracerBoolConversionError:` in a ported program catches mirax's error. mirax
# raises the one class for all of them: each name catches every concretization failure.
ConcretizationTypeError = ConcretizationError
TracerBoolConversionError = ConcretizationError
TracerIntegerConversionError = ConcretizationError
TracerArrayConversionError = ConcretizationError


class IntegerOverflowError(MiraxError, OverflowError, ValueError):
    """A Python int that does not fit the integer dtype it meets (JAX raises OverflowError;
    it is a ValueError too, the class the API promises for a bad value)."""


class DeletedArrayError(MiraxError, RuntimeError):
    """An Array whose buffer was given away (donated to a jitted call, or `.delete()`d) was
    used afterwards (JAX raises RuntimeError here too)."""


# --- the user's op in every message -------------------------------------------------------
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _names(msg: str, name: str) -> bool:
    return re.search(rf"(?<![\w]){re.escape(name)}(?!\w)", msg) is not None


def _raised_by_mirax(e: BaseException) -> bool:
    """Whether the innermost frame of e's traceback is mirax code (not the user's function
    called back by a transform, nor NumPy)."""
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_code.co_filename.startswith(_PACKAGE)


def _rename(e: BaseException, name: str) -> None:
    if e.args and isinstance(e.args[0], str) and not _names(e.args[0], name) and \
            _raised_by_mirax(e):
        e.args = (f"{name}: {e.args[0]}",) + e.args[1:]


_NAMED = (TypeError, ValueError, NotImplementedError)


def naming_errors(fn, name: str):
    """`fn` as a public function `name`: a TypeError / ValueError (or NotImplementedError)
    raised inside mirax whose message does not name `name` (it names a primitive the
    function is built of: `add:` in hypot) gets the prefix `name: `, on the same exception
    object (class and traceback kept), so that every message names the user's op.

    The wrapper has fn's own parameter list (generated), so a call costs one plain extra
    frame (about 0.1 us; forwarding *args, **kwargs would cost several times that)."""
    try:
        src, env = _forwarding_source(fn)
    except (TypeError, ValueError):   # no signature: forward everything
        src, env = ("def public(*args, **kwargs):\n    try:\n"
                    "        return __fn(*args, **kwargs)\n"), {}
    src += ("    except __named as e:\n"
            "        __rename(e, __name)\n"
            "        raise\n")
    # named as fn, so that Python's own "f() missing 1 required positional argument" names it
    fname = fn.__name__ if fn.__name__.isidentifier() and not fn.__name__.startswith("__") \
        else "public"
    src = src.replace("def public(", f"def {fname}(", 1)
    env.update({"__fn": fn, "__named": _NAMED, "__rename": _rename, "__name": name})
    # NOTE: compiled under this file's name, so that the frame counts as mirax's (source
    # lines in graph listings and _raised_by_mirax skip it), not as the user's "<string>"
    exec(compile(src, __file__, "exec"), env)  # a generated forwarder: fn's own signature
    return functools.wraps(fn)(env[fname])


def _forwarding_source(fn):
    """`def public(<fn's parameters>): try: return __fn(<the same, forwarded>)`."""
    params, args, env = [], [], {}
    star = False
    sig = inspect.signature(fn, follow_wrapped=False)  # what fn itself accepts
    kinds = [p.kind for p in sig.parameters.values()]
    for i, p in enumerate(sig.parameters.values()):
        d = ""
        if p.default is not p.empty:
            env[f"__d{i}"] = p.default
            d = f"=__d{i}"
        if p.kind is p.VAR_POSITIONAL:
            params.append(f"*{p.name}")
            args.append(f"*{p.name}")
            star = True
        elif p.kind is p.VAR_KEYWORD:
            params.append(f"**{p.name}")
            args.append(f"**{p.name}")
        elif p.kind is p.KEYWORD_ONLY:
            if not star:
                params.append("*")
                star = True
            params.append(p.name + d)
            args.append(f"{p.name}={p.name}")
        else:
            params.append(p.name + d)
            args.append(p.name)
            if p.kind is p.POSITIONAL_ONLY and (
                    i + 1 == len(kinds) or kinds[i + 1] is not p.POSITIONAL_ONLY):
                params.append("/")
    return (f"def public({', '.join(params)}):\n    try:\n"
            f"        return __fn({', '.join(args)})\n"), env


def name_public_functions(namespace: dict, names, prefix: str = "") -> None:
    """Rebind each plain function `namespace[n]` (n in names) to naming_errors(f, prefix+n)
    (a public module calls this once, on its own globals, at its end). Aliases (one function
    under several names: remat / checkpoint) share one wrapper, so `is` still holds; it is
    named after the function's own name when that is one of them."""
    aliases: dict = {}
    for n in names:
        f = namespace.get(n)
        if isinstance(f, types.FunctionType) and not n.startswith("_"):
            aliases.setdefault(id(f), (f, []))[1].append(n)
    for f, ns in aliases.values():
        name = f.__name__ if f.__name__ in ns else ns[0]
        wrapped = naming_errors(f, prefix + name)
        # found under its public name (pickle looks functions up by module and qualname)
        wrapped.__module__, wrapped.__qualname__ = namespace.get("__name__", f.__module__), name
        for n in ns:
            namespace[n] = wrapped


def check_callable(f, op: str, what: str = "a function"):
    """f, if it is callable; else the TypeError JAX raises (at transform time, not later)."""
    if not callable(f):
        raise TypeError(f"{op}: expected {what}, got {type(f).__name__} {f!r:.60}")
    return f


def int_tuple(op: str, what: str, value) -> tuple[int, ...]:
    """An int or a sequence of ints (argnums, static_argnums, ...) as a tuple, else a
    TypeError naming the transform and the argument."""
    try:
        nums = (value,) if isinstance(value, int) else tuple(value)
    except TypeError:   # not iterable
        nums = (value,)
    for a in nums:
        if not isinstance(a, int) or isinstance(a, bool):
            raise TypeError(f"{op}: {what} must be an int or a sequence of ints, got "
                            f"{value!r}")
    return nums
