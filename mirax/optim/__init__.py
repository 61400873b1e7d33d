"""mirax.optim: functional, optax-shaped optimizers.

An optimizer is a `GradientTransformation(init, update)`:

    opt = mx.optim.adam(1e-3)
    state = opt.init(params)
    updates, state = opt.update(grads, state, params)
    params = mx.optim.apply_updates(params, updates)

The state is a pytree of arrays (NamedTuples; step counters are int32 arrays), so a whole
training step, optimizer included, runs under `mx.jit`. Learning rates may be floats or
schedules (functions of the step count, see schedules.py). Formulas follow optax.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import mirax.numpy as mnp
from mirax.core.errors import name_public_functions, naming_errors
from mirax.core import tree
from mirax.optim.schedules import hyper
from mirax.optim.schedules import (  # noqa: F401
    constant_schedule, cosine_decay_schedule, exponential_decay, linear_schedule,
    warmup_cosine_decay_schedule)

__all__ = [
    "GradientTransformation", "adagrad", "adam", "adamw", "add_decayed_weights",
    "apply_updates", "chain", "clip_by_global_norm", "constant_schedule",
    "cosine_decay_schedule", "exponential_decay", "global_norm", "linear_schedule", "lion",
    "momentum", "rmsprop", "scale", "scale_by_adam", "scale_by_learning_rate", "scale_by_lion",
    "scale_by_rms", "scale_by_rss", "sgd", "trace", "warmup_cosine_decay_schedule",
]


class GradientTransformation(NamedTuple):
    init: Callable[[Any], Any]
    update: Callable[..., tuple[Any, Any]]   # (updates, state, params=None) -> (updates, state)


class EmptyState(NamedTuple):
    pass


class ScaleByScheduleState(NamedTuple):
    count: Any


class TraceState(NamedTuple):
    trace: Any


class ScaleByAdamState(NamedTuple):
    count: Any
    mu: Any
    nu: Any


class ScaleByRssState(NamedTuple):
    sum_of_squares: Any


class ScaleByLionState(NamedTuple):
    count: Any
    mu: Any


class ScaleByRmsState(NamedTuple):
    mu: Any   # running mean of g (centered only; else ())
    nu: Any   # running mean of g^2


def _zeros(params):
    return tree.map(mnp.zeros_like, params)


def _count():
    return mnp.zeros((), mnp.int32)


def apply_updates(params, updates):
    """params + updates, leaf by leaf, keeping each parameter's dtype."""
    return tree.map(lambda p, u: (p + u).astype(p.dtype) if p is not None else None,
                    params, updates)


def global_norm(updates):
    """sqrt of the sum of squares of every leaf."""
    return mnp.sqrt(sum(mnp.sum(mnp.square(u)) for u in tree.leaves(updates)))


def chain(*transforms: GradientTransformation) -> GradientTransformation:
    """Apply the transformations in order; the state is the tuple of their states."""
    def init(params):
        return tuple(t.init(params) for t in transforms)

    def update(updates, state, params=None):
        new_state = []
        for t, s in zip(transforms, state):
            updates, s = t.update(updates, s, params)
            new_state.append(s)
        return updates, tuple(new_state)
    return GradientTransformation(init, update)


def _stateless(fn) -> GradientTransformation:
    return GradientTransformation(lambda params: EmptyState(),
                                  lambda updates, state, params=None: (fn(updates, params), state))


def scale(step_size) -> GradientTransformation:
    """u -> step_size * u."""
    hyper("scale", step_size=step_size)
    return _stateless(lambda updates, params: tree.map(lambda u: u * step_size, updates))


def scale_by_learning_rate(learning_rate, flip_sign: bool = True) -> GradientTransformation:
    """u -> -lr * u; a callable lr is a schedule evaluated at its own step counter."""
    if not callable(learning_rate):
        hyper("scale_by_learning_rate", learning_rate=learning_rate)
    sign = -1.0 if flip_sign else 1.0
    if not callable(learning_rate):
        return scale(sign * learning_rate)

    def update(updates, state, params=None):
        lr = learning_rate(state.count)
        updates = tree.map(lambda u: u * (sign * lr).astype(u.dtype), updates)
        return updates, ScaleByScheduleState(state.count + 1)
    return GradientTransformation(lambda params: ScaleByScheduleState(_count()), update)


def clip_by_global_norm(max_norm) -> GradientTransformation:
    """Rescale all updates together so that their global norm is at most max_norm."""
    hyper("clip_by_global_norm", max_norm=max_norm)
    def fn(updates, params):
        norm = global_norm(updates)
        factor = mnp.where(norm < max_norm, 1.0, max_norm / mnp.maximum(norm, 1e-30))
        return tree.map(lambda u: u * factor.astype(u.dtype), updates)
    return _stateless(fn)


def add_decayed_weights(weight_decay=0.0, mask=None) -> GradientTransformation:
    """u -> u + weight_decay * p (where mask, a pytree of bools or a function of params,
    says True)."""
    hyper("add_decayed_weights", weight_decay=weight_decay)
    def fn(updates, params):
        if params is None:
            raise ValueError("add_decayed_weights: update() needs params")
        m = mask(params) if callable(mask) else mask
        if m is None:
            return tree.map(lambda u, p: u + weight_decay * p, updates, params)
        return tree.map(lambda u, p, keep: u + weight_decay * p if keep else u,
                        updates, params, m)
    return _stateless(fn)


def trace(decay, nesterov: bool = False) -> GradientTransformation:
    """Momentum: t <- g + decay * t; the update is t (or g + decay * t when nesterov)."""
    hyper("trace", decay=decay)
    def update(updates, state, params=None):
        new = tree.map(lambda g, t: g + decay * t, updates, state.trace)
        out = tree.map(lambda g, t: g + decay * t, updates, new) if nesterov else new
        return out, TraceState(new)
    return GradientTransformation(lambda params: TraceState(_zeros(params)), update)


def scale_by_adam(b1=0.9, b2=0.999, eps=1e-8, eps_root=0.0) -> GradientTransformation:
    """Adam's direction: m_hat / (sqrt(v_hat + eps_root) + eps), bias-corrected moments."""
    hyper("scale_by_adam", b1=b1, b2=b2, eps=eps, eps_root=eps_root)
    def update(updates, state, params=None):
        mu = tree.map(lambda g, m: b1 * m + (1 - b1) * g, updates, state.mu)
        nu = tree.map(lambda g, v: b2 * v + (1 - b2) * mnp.square(g), updates, state.nu)
        count = state.count + 1

        def direction(m, v):   # bias corrections in the parameter's own precision
            t = count.astype(m.dtype)
            c1 = 1 - mnp.power(mnp.asarray(b1, m.dtype), t)
            c2 = 1 - mnp.power(mnp.asarray(b2, m.dtype), t)
            return (m / c1) / (mnp.sqrt(v / c2 + eps_root) + eps)
        return tree.map(direction, mu, nu), ScaleByAdamState(count, mu, nu)
    return GradientTransformation(
        lambda params: ScaleByAdamState(_count(), _zeros(params), _zeros(params)), update)


def scale_by_rms(decay=0.9, eps=1e-8, initial_scale=0.0, centered=False
                 ) -> GradientTransformation:
    """RMSProp's direction: g / sqrt(E[g^2] + eps) (or / sqrt(E[g^2] - E[g]^2 + eps))."""
    hyper("scale_by_rms", decay=decay, eps=eps, initial_scale=initial_scale)
    def init(params):
        nu = tree.map(lambda p: mnp.full_like(p, initial_scale), params)
        return ScaleByRmsState(_zeros(params) if centered else (), nu)

    def update(updates, state, params=None):
        nu = tree.map(lambda g, v: decay * v + (1 - decay) * mnp.square(g), updates, state.nu)
        if centered:
            mu = tree.map(lambda g, m: decay * m + (1 - decay) * g, updates, state.mu)
            out = tree.map(lambda g, m, v: g / mnp.sqrt(v - mnp.square(m) + eps),
                           updates, mu, nu)
            return out, ScaleByRmsState(mu, nu)
        out = tree.map(lambda g, v: g / mnp.sqrt(v + eps), updates, nu)
        return out, ScaleByRmsState((), nu)
    return GradientTransformation(init, update)


def scale_by_rss(initial_accumulator_value=0.1, eps=1e-7) -> GradientTransformation:
    """Adagrad's direction: g / sqrt(sum of all g^2 so far + eps) (0 where the sum is 0)."""
    hyper("scale_by_rss", initial_accumulator_value=initial_accumulator_value, eps=eps)
    def init(params):
        return ScaleByRssState(tree.map(
            lambda p: mnp.full_like(p, initial_accumulator_value), params))

    def update(updates, state, params=None):
        ss = tree.map(lambda g, t: mnp.square(g) + t, updates, state.sum_of_squares)
        out = tree.map(lambda g, t: mnp.where(t > 0, g / mnp.sqrt(t + eps), 0.0), updates, ss)
        return out, ScaleByRssState(ss)
    return GradientTransformation(init, update)


def scale_by_lion(b1=0.9, b2=0.99) -> GradientTransformation:
    """Lion's direction: sign((1 - b1) g + b1 m), then m <- b2 m + (1 - b2) g."""
    hyper("scale_by_lion", b1=b1, b2=b2)
    def update(updates, state, params=None):
        out = tree.map(lambda g, m: mnp.sign((1 - b1) * g + b1 * m), updates, state.mu)
        mu = tree.map(lambda g, m: b2 * m + (1 - b2) * g, updates, state.mu)
        return out, ScaleByLionState(state.count + 1, mu)
    return GradientTransformation(
        lambda params: ScaleByLionState(_count(), _zeros(params)), update)


# --- the optimizers ------------------------------------------------------------------------
def sgd(learning_rate, momentum=None, nesterov: bool = False) -> GradientTransformation:
    """p <- p - lr * g (with heavy-ball or Nesterov momentum when momentum is given)."""
    if momentum is None:
        return chain(scale_by_learning_rate(learning_rate))
    return chain(trace(momentum, nesterov), scale_by_learning_rate(learning_rate))


def momentum(learning_rate, beta=0.9, nesterov: bool = False) -> GradientTransformation:
    """SGD with momentum: t <- g + beta t; p <- p - lr * t (Nesterov: g + beta t)."""
    return sgd(learning_rate, beta, nesterov)


def adam(learning_rate, b1=0.9, b2=0.999, eps=1e-8, eps_root=0.0) -> GradientTransformation:
    """Adam (Kingma & Ba, 2015)."""
    return chain(scale_by_adam(b1, b2, eps, eps_root), scale_by_learning_rate(learning_rate))


def adamw(learning_rate, b1=0.9, b2=0.999, eps=1e-8, eps_root=0.0, weight_decay=1e-4,
          mask=None) -> GradientTransformation:
    """Adam with decoupled weight decay (Loshchilov & Hutter, 2019):
    p <- p - lr * (adam_direction + weight_decay * p)."""
    return chain(scale_by_adam(b1, b2, eps, eps_root), add_decayed_weights(weight_decay, mask),
                 scale_by_learning_rate(learning_rate))


def rmsprop(learning_rate, decay=0.9, eps=1e-8, initial_scale=0.0, centered=False,
            momentum=None, nesterov=False) -> GradientTransformation:
    """RMSProp (Tieleman & Hinton, 2012), optionally centered and with momentum."""
    parts = [scale_by_rms(decay, eps, initial_scale, centered),
             scale_by_learning_rate(learning_rate)]
    if momentum is not None:
        parts.append(trace(momentum, nesterov))
    return chain(*parts)


def adagrad(learning_rate, initial_accumulator_value=0.1, eps=1e-7) -> GradientTransformation:
    """Adagrad (Duchi et al., 2011): p <- p - lr * g / sqrt(sum of g^2 + eps)."""
    return chain(scale_by_rss(initial_accumulator_value, eps),
                 scale_by_learning_rate(learning_rate))


def lion(learning_rate, b1=0.9, b2=0.99, weight_decay=1e-3, mask=None) -> GradientTransformation:
    """Lion (Chen et al., 2023): p <- p - lr * (sign(interpolated momentum) + wd * p)."""
    return chain(scale_by_lion(b1, b2), add_decayed_weights(weight_decay, mask),
                 scale_by_learning_rate(learning_rate))


def _naming_updates(make, name):
    """make (a function returning a GradientTransformation), whose init and update name
    `name` in their errors (a gradient of the wrong shape: `optim.adam.update: ...`)."""
    @functools.wraps(make)
    def made(*args, **kwargs):
        t = make(*args, **kwargs)
        return GradientTransformation(naming_errors(t.init, f"{name}.init"),
                                      naming_errors(t.update, f"{name}.update"))
    return made


for _n in __all__:
    if getattr(globals()[_n], "__annotations__", {}).get("return") == "GradientTransformation":
        globals()[_n] = _naming_updates(globals()[_n], "optim." + _n)
name_public_functions(globals(), __all__)  # every message names the op
