"""jit: stage a function into a Graph once per argument signature, then run the compiled
graph through the `call` primitive.

`call` carries its Graph as a param. Eagerly it runs the backend's executable; under a
transform its rules transform the graph itself (jvp / vjp / vmap of `eval_graph`,
staged into a new graph and cached), so grad of jit and vmap of jit stay compiled; when
staged inside another jit it is inlined. The cache key is (pytree structure, avals with
weak types, static arguments, the default_matmul_precision knob, device); `cache_info()`
counts hits, misses and evictions.
"""
from __future__ import annotations

import inspect
import threading
import sys
from collections import OrderedDict, namedtuple

import numpy as np

from mirax.core import axes as _axes, config, dtypes, profile_events, tree
from mirax.core.array import Array, DeletedBuffer
from mirax.core.errors import int_tuple
from mirax.core.runtime import executable, platform_of
from mirax.core.trace import Tracer, aval_of, busy as _busy, state as _state
from mirax.graph.build import arg_names_for, trace_to_graph
from mirax.ops.call import call_p
from mirax.ops.common import operand

# --- jit ----------------------------------------------------------------------------------
_LEAF = tree.structure(0)
CacheInfo = namedtuple("CacheInfo", "hits misses size maxsize evictions")


def _leaf_key(x):
    if type(x) is Array:
        b = x._buf
        return (b.shape, b.dtype, x._weak)
    if isinstance(x, Tracer):
        a = x.aval
        return (a.shape, a.dtype, a.weak_type)
    if isinstance(x, (np.ndarray, np.generic)):  # first: np.float64 is a float subclass
        return (x.shape,) + dtypes.input_dtype(x)
    if isinstance(x, (bool, int, float)):
        return ((), dtypes.python_scalar_dtype(x), not isinstance(x, bool))
    raise TypeError(f"jit: argument of type {type(x).__name__} is not an array; mark it "
                    "static (static_argnums / static_argnames)")


class Jitted:
    def __init__(self, f, static_argnums=(), static_argnames=(), donate_argnums=(),
                 cache_size=None, donate_argnames=()):
        if not callable(f):
            raise TypeError(f"jit: expected a function, got {type(f).__name__}")
        self.f = f
        self.__name__ = getattr(f, "__name__", "f")
        self.__doc__ = getattr(f, "__doc__", None)
        self.__wrapped__ = f
        as_tuple = (lambda v: (v,) if isinstance(v, str) else tuple(v))   # (names)
        self.static_argnums = int_tuple(f"jit({self.__name__})", "static_argnums",
                                        static_argnums)
        self.static_argnames = as_tuple(static_argnames)
        self.donate_argnums = int_tuple(f"jit({self.__name__})", "donate_argnums",
                                        donate_argnums)
        try:
            self.params = list(inspect.signature(f).parameters)
            _check_specs(f"jit({self.__name__})", inspect.signature(f), self.static_argnums,
                         self.static_argnames, self.donate_argnums, as_tuple(donate_argnames))
        except (TypeError, ValueError) as e:
            if str(e).startswith("jit("):
                raise
            self.params = []
        # names also fix positions (static) and go by position (donation, a hint); a name
        # that is no parameter (a **kwargs entry) only applies as a keyword
        pos = {name: i for i, name in enumerate(self.params)}
        self.static_argnums += tuple(pos[n] for n in self.static_argnames if n in pos)
        self.donate_argnums += tuple(pos[n] for n in as_tuple(donate_argnames) if n in pos)
        self.cache: OrderedDict = OrderedDict()
        self.maxsize = cache_size or config.get("jit_cache_size")
        self.hits = self.misses = self.evictions = 0
        # guards cache, _fast and the counters (never held while tracing or running)
        self._lock = threading.Lock()
        self.explain = config.get("explain_cache_misses")
        self._last_sig = None
        self._fast: dict = {}  # flat Array signature -> (key, run, out_tree, n_out, donate)

    def cache_info(self) -> CacheInfo:
        return CacheInfo(self.hits, self.misses, len(self.cache), self.maxsize, self.evictions)

    def clear_cache(self):
        with self._lock:
            self.cache.clear()
            self._fast = {}

    def _split(self, args, kwargs):
        static, dyn = [], []
        for i, a in enumerate(args):
            (static if i in self.static_argnums else dyn).append((i, a))
        statics = tuple((i, _hashable(a, f"argument {i}")) for i, a in static)
        kw_static = tuple(sorted((k, _hashable(v, f"argument '{k}'")) for k, v in kwargs.items()
                                 if k in self.static_argnames))
        kw_dyn = {k: v for k, v in kwargs.items() if k not in self.static_argnames}
        return statics + kw_static, [a for _, a in dyn], kw_dyn

    def __call__(self, *args, **kwargs):
        # Fast path: flat positional Arrays, no interpreter active, a compiled entry for
        # their buffers' type (so platform), shapes and dtypes. The knob resolves the
        # precision of the products traced without one: part of the key.
        prec = config.get("default_matmul_precision")
        fkey = None
        if not kwargs and not (_busy[0] and _state.active) and not _axes.busy[0]:
            try:
                fkey = _fast_key(prec, args)
            except AttributeError:  # not all Arrays (or a tracer): the general path
                pass
            entry = None if fkey is None else self._fast.get(fkey)
            if entry is not None:
                key, run, out_tree, n_out, donate = entry
                # no lock here (it would cost a third of this path): both steps are one
                # bytecode-atomic update each under the GIL
                self.hits += 1
                try:
                    self.cache.move_to_end(key)
                except KeyError:  # another thread evicted it meanwhile
                    pass
                bufs = [a._buf for a in args]
                for i, why in donate:
                    bufs[i] = None  # so that _take sees every other reference to it
                    bufs[i] = _take(args[i], why)
                outs = run(*bufs)
                if n_out < 0:  # a single array
                    return Array(outs[0], False)
                return tree.unflatten(out_tree, [Array(o, False) for o in outs])
        statics, dyn, kw_dyn = self._split(args, kwargs)
        leaves, in_tree = tree.flatten((dyn, kw_dyn))
        # (bound axis names and sizes: a collective's shape depends on them)
        key = (in_tree, tuple(map(_leaf_key, leaves)), statics, prec, _axes.signature())
        # Python and NumPy scalars/arrays become Arrays (weak or strong as the key says), so
        # tracing sees the key's avals and an output that is an input is still an Array
        leaves = [x if isinstance(x, (Array, Tracer)) else operand(x, "jit") for x in leaves]
        with self._lock:
            entry = self.cache.get(key)
            if entry is None:
                self.misses += 1
            else:
                self.hits += 1
                self.cache.move_to_end(key)
        if entry is None:
            if self.explain:
                self._explain_miss(key, args, kwargs)
            entry = self._trace(args, kwargs, leaves, in_tree)
            if entry[1] is None:  # closes over tracers of an enclosing transform: no cache
                graph, _, captured = entry
                outs = call_p.bind(*leaves, *captured, graph=graph)
                return tree.unflatten(graph.out_tree, outs)
            with self._lock:  # another thread may have traced the same key: first wins
                entry = self.cache.setdefault(key, entry)
                if len(self.cache) > self.maxsize:
                    self.cache.popitem(last=False)
                    self.evictions += 1
                    self._fast = {k: e for k, e in self._fast.items() if e[0] in self.cache}
        graph, out_tree = entry[0], entry[1]
        # a fast entry for this call's key (of the buffers as they came, before any is
        # donated) where they are plain Arrays all of one platform
        types = {k[0] for k in fkey[1:]} if fkey is not None else None
        if types is None or statics or len(leaves) != len(args) or \
                not all(type(a) is Array for a in args) or len(types) > 1 or \
                DeletedBuffer in types:
            fkey = None
        else:
            platform = platform_of([a._buf for a in args])
        donate = graph.cache.get("donate_why", ())
        if donate and not (_busy[0] and _state.active):
            leaves = list(leaves)
            for i, why in donate:  # the caller's Array is deleted; a NumPy argument copied
                x = leaves[i]
                if type(x) is Array:
                    leaves[i] = None
                    leaves[i] = Array(_take(x, why), x._weak)
                elif isinstance(x, np.ndarray):
                    leaves[i] = np.array(x)
        outs = call_p.bind(*leaves, graph=graph)
        if fkey is not None:  # what eager dispatch of `call` ran: the platform's executable
            n_out = -1 if out_tree == _LEAF else len(outs)
            fast = (key, executable(graph, platform), out_tree, n_out, donate)
            with self._lock:
                if key in self.cache:  # (not evicted meanwhile by another thread)
                    self._fast[fkey] = fast
        return tree.unflatten(out_tree, outs)

    def _trace(self, args, kwargs, leaves, in_tree):
        box = []

        def flat_fn(*xs):
            dyn, kw_dyn = tree.unflatten(in_tree, list(xs))
            it = iter(dyn)
            full = [a if i in self.static_argnums else next(it) for i, a in enumerate(args)]
            kw = {k: v for k, v in kwargs.items() if k in self.static_argnames}
            kw.update(kw_dyn)
            out = self.f(*full, **kw)
            out_leaves, out_tree = tree.flatten(out)
            box.append(out_tree)
            return [operand(o, "jit") for o in out_leaves]

        names = self._leaf_names(args, kwargs)
        avals = [aval_of(x) for x in leaves]  # leaves are Arrays/tracers by now (__call__)
        with profile_events.span(f"trace {self.__name__}", "compile"):
            graph, captured = trace_to_graph(flat_fn, avals, self.__name__, names)
        graph.in_tree, graph.out_tree = in_tree, box[0]
        if self.donate_argnums:  # flat leaf indices of donated positional arguments
            donate, start = [], 0
            for i, a in enumerate(args):
                if i in self.static_argnums:
                    continue
                n = len(tree.leaves(a))
                if i in self.donate_argnums:
                    donate.extend(range(start, start + n))
                start += n
            graph.cache["donate"] = tuple(donate)
            names = self._leaf_names(args, kwargs)
            graph.cache["donate_why"] = tuple(
                (i, f"it was donated to jit({self.__name__}) as argument {names[i]!r}")
                for i in donate)
        if captured:
            return graph, None, captured
        return graph, box[0], []

    def _leaf_names(self, args, kwargs) -> list[str]:
        """Argument paths of the dynamic leaves (`params['w']`, `x`), in flattening order."""
        dyn = [a for i, a in enumerate(args) if i not in self.static_argnums]
        return arg_names_for(self.f, dyn) + [
            k + tree.keystr(p) for k, v in sorted(kwargs.items())
            if k not in self.static_argnames for p, _ in tree.leaves_with_path(v)]

    def _explain_miss(self, key, args, kwargs):
        import sys
        sig = self._signature(key, args, kwargs)
        prev = self._last_sig
        self._last_sig = sig
        if prev is None:
            print(f"jit({self.__name__}): first compilation", file=sys.stderr)
            return
        changes = [f"{k}: {prev.get(k, 'absent')} -> {v}" for k, v in sig.items()
                   if prev.get(k) != v]
        changes += [f"{k}: {v} -> absent" for k, v in prev.items() if k not in sig]
        print(f"jit({self.__name__}): recompiling because " + ("; ".join(changes) or
              "the argument structure changed"), file=sys.stderr)

    def _signature(self, key, args, kwargs) -> dict:
        in_tree, leaf_keys, statics, prec = key[:4]
        names = self._leaf_names(args, kwargs)
        sig = {"default_matmul_precision": prec}
        for n, (shape, dtype, weak) in zip(names, leaf_keys):
            sig[n] = f"{dtypes.short_name(dtype)}[{','.join(map(str, shape))}]" + (
                " (weak type)" if weak else "")
        for i, v in statics:
            label = self.params[i] if isinstance(i, int) and i < len(self.params) else i
            sig[f"static {label}"] = repr(v)
        return sig


def _fast_key(prec, args) -> tuple:
    """The fast path's key of positional Arrays: the precision knob, and each buffer's type
    (so its platform), shape, dtype and weak type."""
    return (prec, *[(type(a._buf), a._buf.shape, a._buf.dtype, a._weak) for a in args])


def _take(x: Array, why: str):
    """The buffer of a donated Array, which is deleted (a later use raises, naming `why`).
    The executable may overwrite it, so a host buffer that anything else can still see (a
    view, a read-only array, another reference: NumPy views hold their base) is copied."""
    b = x._buf
    if type(b) is DeletedBuffer:
        raise b.error()
    x.delete(why)
    if isinstance(b, (np.ndarray, np.generic)) and not (
            type(b) is np.ndarray and b.flags.writeable and b.base is None
            and sys.getrefcount(b) <= _OWN_REFS):
        b = np.array(b)  # device buffers: their plans never write into inputs
    return b


def _refs_of_a_local() -> int:
    b = np.empty(1)
    return sys.getrefcount(b)


_OWN_REFS = _refs_of_a_local()  # the count _take sees when only its local name holds b (2)


def _check_specs(name, sig, static_argnums, static_argnames, donate_argnums, donate_argnames):
    """JAX's checks of jit's argument specs against f's signature: numbers within the
    positional parameters, names among the parameters (unless f takes *args / **kwargs)."""
    kinds = [p.kind for p in sig.parameters.values()]
    npos = sum(k in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
               for k in kinds)
    for what, nums in (("static_argnums", static_argnums), ("donate_argnums", donate_argnums)):
        for i in nums:   # (ints: errors.int_tuple)
            if inspect.Parameter.VAR_POSITIONAL not in kinds and not -npos <= i < npos:
                raise ValueError(f"{name}: {what} {i} is out of range for a function of "
                                 f"{npos} positional parameters")
    for what, names in (("static_argnames", static_argnames),
                        ("donate_argnames", donate_argnames)):
        for n in names:
            if not isinstance(n, str):
                raise TypeError(f"{name}: {what} must be strings, got {n!r}")
            if inspect.Parameter.VAR_KEYWORD not in kinds and n not in sig.parameters:
                raise ValueError(f"{name}: {what} {n!r} is not a parameter of the function "
                                 f"(its parameters: {', '.join(sig.parameters)})")


def _hashable(v, what):
    try:
        hash(v)
    except TypeError:
        raise TypeError(f"jit: static {what} must be hashable, got an unhashable "
                        f"{type(v).__name__}; pass it as a tuple or mark it non-static") from None
    return v


def jit(f=None, *, static_argnums=(), static_argnames=(), donate_argnums=(),
        donate_argnames=(), cache_size=None):
    if f is None:
        return lambda g: jit(g, static_argnums=static_argnums, static_argnames=static_argnames,
                             donate_argnums=donate_argnums, donate_argnames=donate_argnames,
                             cache_size=cache_size)
    return Jitted(f, static_argnums, static_argnames, donate_argnums, cache_size,
                  donate_argnames)
