"""Learning-rate schedules: functions from the step count (an int or an integer array, also
traced under jit) to a float32 scalar, with optax's names and formulas."""
from __future__ import annotations

import math

import numpy as np

import mirax.numpy as mnp
from mirax.core.array import ArrayOps

__all__ = ["constant_schedule", "cosine_decay_schedule", "exponential_decay",
           "linear_schedule", "warmup_cosine_decay_schedule"]


def hyper(op: str, **values) -> None:
    """Check hyperparameters when the optimizer or schedule is made (a string or None would
    otherwise fail, or worse, broadcast, at the first update): each a real number (or a
    0-d array, possibly traced)."""
    for name, v in values.items():
        if isinstance(v, (int, float, np.integer, np.floating)) or \
                isinstance(v, ArrayOps) and v.ndim == 0:
            continue
        raise TypeError(f"{op}: {name} must be a number, got {type(v).__name__} {v!r:.60}")


def _step(count):
    return mnp.asarray(count).astype(mnp.float32)


def constant_schedule(value):
    """lr(t) = value."""
    hyper("constant_schedule", value=value)
    value = float(value)
    return lambda count: mnp.full((), value, mnp.float32)


def linear_schedule(init_value, end_value, transition_steps, transition_begin=0):
    """Linear from init_value to end_value over transition_steps, after transition_begin."""
    hyper("linear_schedule", init_value=init_value, end_value=end_value,
          transition_steps=transition_steps, transition_begin=transition_begin)
    if transition_steps <= 0:
        return constant_schedule(init_value)

    def schedule(count):
        frac = mnp.clip((_step(count) - transition_begin) / transition_steps, 0.0, 1.0)
        return init_value + (end_value - init_value) * frac
    return schedule


def cosine_decay_schedule(init_value, decay_steps, alpha=0.0, exponent=1.0):
    """lr(t) = init * ((1 - alpha) * (0.5 (1 + cos(pi t / T)))^exponent + alpha), t <= T."""
    hyper("cosine_decay_schedule", init_value=init_value, decay_steps=decay_steps,
          alpha=alpha, exponent=exponent)
    if decay_steps <= 0:
        raise ValueError(f"cosine_decay_schedule: decay_steps must be > 0, got {decay_steps}")

    def schedule(count):
        t = mnp.minimum(_step(count), float(decay_steps))
        cos = 0.5 * (1.0 + mnp.cos(math.pi * t / decay_steps))
        return init_value * ((1.0 - alpha) * cos ** exponent + alpha)
    return schedule


def warmup_cosine_decay_schedule(init_value, peak_value, warmup_steps, decay_steps,
                                 end_value=0.0, exponent=1.0):
    """Linear warmup init -> peak over warmup_steps, then cosine decay peak -> end_value,
    reaching it at step decay_steps (which counts the warmup, as in optax)."""
    hyper("warmup_cosine_decay_schedule", init_value=init_value,
          peak_value=peak_value, warmup_steps=warmup_steps, decay_steps=decay_steps,
          end_value=end_value, exponent=exponent)
    alpha = 0.0 if peak_value == 0 else end_value / peak_value
    warm = linear_schedule(init_value, peak_value, warmup_steps)
    cos = cosine_decay_schedule(peak_value, max(decay_steps - warmup_steps, 1), alpha, exponent)

    def schedule(count):
        t = _step(count)
        return mnp.where(t < warmup_steps, warm(t), cos(t - warmup_steps))
    return schedule


def exponential_decay(init_value, transition_steps, decay_rate, transition_begin=0,
                      staircase=False, end_value=None):
    """lr(t) = init * decay_rate^((t - begin) / transition_steps) (floored when staircase),
    held at init before transition_begin and clipped at end_value when given."""
    hyper("exponential_decay", init_value=init_value, transition_steps=transition_steps,
          decay_rate=decay_rate, transition_begin=transition_begin)
    if transition_steps <= 0:
        return constant_schedule(init_value)

    def schedule(count):
        p = mnp.maximum(_step(count) - transition_begin, 0.0) / transition_steps
        if staircase:
            p = mnp.floor(p)
        lr = init_value * mnp.power(mnp.asarray(decay_rate, mnp.float32), p)
        if end_value is not None:
            lr = (mnp.maximum if decay_rate < 1 else mnp.minimum)(lr, end_value)
        return lr
    return schedule
