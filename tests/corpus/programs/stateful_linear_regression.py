# Source: "Stateful computations" (docs/stateful-computations.md, formerly JAX 101 "Stateful
# Computations in JAX"), jax.readthedocs.io
# Copyright 2021 The JAX Authors. Licensed under the Apache License, Version 2.0.
# Ported to mirax by its imports only. For the corpus: np.random.seed(0) first (both runs see
# the same data) and 200 steps; the cells wrapped in main().
from typing import NamedTuple

import numpy as np

import mirax as jax
import mirax.numpy as jnp


class Counter:
  """A simple counter."""

  def __init__(self):
    self.n = 0

  def count(self) -> int:
    """Increments the counter and returns the new value."""
    self.n += 1
    return self.n

  def reset(self):
    """Resets the counter to zero."""
    self.n = 0


CounterState = int


class CounterV2:

  def count(self, n: CounterState) -> tuple[int, CounterState]:
    # You could just return n+1, but here we separate its role as
    # the output and as the counter state for didactic purposes.
    return n+1, n+1

  def reset(self) -> CounterState:
    return 0


class Params(NamedTuple):
  weight: jnp.ndarray
  bias: jnp.ndarray


def init(rng) -> Params:
  """Returns the initial model params."""
  weights_key, bias_key = jax.random.split(rng)
  weight = jax.random.normal(weights_key, ())
  bias = jax.random.normal(bias_key, ())
  return Params(weight, bias)


def loss(params: Params, x: jnp.ndarray, y: jnp.ndarray) -> jnp.ndarray:
  """Computes the least squares error of the model's predictions on x against y."""
  pred = params.weight * x + params.bias
  return jnp.mean((pred - y) ** 2)


LEARNING_RATE = 0.005


@jax.jit
def update(params: Params, x: jnp.ndarray, y: jnp.ndarray) -> Params:
  """Performs one SGD update step on params using the given data."""
  grad = jax.grad(loss)(params, x, y)

  # If we were using Adam or another stateful optimizer,
  # we would also do something like
  #
  #   updates, new_optimizer_state = optimizer(grad, optimizer_state)
  #
  # and then use `updates` instead of `grad` to actually update the params.
  # (And we'd include `new_optimizer_state` in the output, naturally.)

  new_params = jax.tree.map(
      lambda param, g: param - g * LEARNING_RATE, params, grad)

  return new_params


def main():
  np.random.seed(0)
  counter = Counter()
  counts = [counter.count() for _ in range(3)]
  counter.reset()
  fast_count = jax.jit(counter.count)
  jit_counts = [int(fast_count()) for _ in range(3)]
  state = CounterV2().reset()
  fast_count2 = jax.jit(CounterV2().count)
  v2 = []
  for _ in range(3):
    value, state = fast_count2(state)
    v2.append(value)

  xs = np.random.normal(size=(100,))
  noise = np.random.normal(scale=0.1, size=(100,))
  ys = xs * 3 - 1 + noise
  params = init(jax.random.key(123))
  for _ in range(200):
    params = update(params, xs, ys)
  return {"counts": counts, "jit_counts": jit_counts, "v2": v2,
          "weight": params.weight, "bias": params.bias, "loss": loss(params, xs, ys)}
