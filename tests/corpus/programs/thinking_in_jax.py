# Source: "How to think in JAX" (docs/notebooks/thinking_in_jax.ipynb), jax.readthedocs.io
# Copyright 2021 The JAX Authors. Licensed under the Apache License, Version 2.0.
# Ported to mirax by its imports only. For the corpus: smaller sizes; the cells that show an
# error run inside try/except and record that they raised; the cells wrapped in main().
import numpy as np

import mirax as jax  # noqa: F401
import mirax.numpy as jnp
from mirax import jit
from mirax import lax
from mirax import random


# mirax.lax binary ops promote mixed dtypes as mirax.numpy does; jax.lax refuses them
KNOWN_DIFFERENCES = {"lax_add_mixed_raised": "mirax.lax.add(1, 1.0) promotes"}


def norm(X):
  X = X - X.mean(0)
  return X / X.std(0)


def get_negatives(x):
  return x[x < 0]


@jit
def f(x, y):
  print("Running f():")
  print(f"  x = {x}")
  print(f"  y = {y}")
  result = jnp.dot(x + 1, y + 1)
  print(f"  result = {result}")
  return result


def g(x, neg):
  return -x if neg else x


def main():
  out = {}
  key = random.key(1701)
  x_jnp = jnp.linspace(0, 10, 100)
  y_jnp = 2 * jnp.sin(x_jnp) * jnp.cos(x_jnp)
  out["sin_cos"] = y_jnp

  x = jnp.arange(10)
  y = x.at[0].set(10)
  out["at_set"] = (x, y)
  out["add_promote"] = jnp.add(1, 1.0)
  out["lax_add"] = lax.add(jnp.float32(1), 1.0)
  try:
    lax.add(1, 1.0)
    out["lax_add_mixed_raised"] = False
  except TypeError:
    out["lax_add_mixed_raised"] = True

  x = jnp.array([1, 2, 1])
  y = jnp.ones(10)
  out["convolve"] = jnp.convolve(x, y)
  result = lax.conv_general_dilated(
      x.reshape(1, 1, 3).astype(float),  # note: explicit promotion
      y.reshape(1, 1, 10),
      window_strides=(1,),
      padding=[(len(y) - 1, len(y) - 1)])  # equivalent of padding='full' in NumPy
  out["conv_general_dilated"] = result[0, 0]

  np.random.seed(1701)
  X = jnp.array(np.random.rand(1000, 10))
  norm_compiled = jit(norm)
  out["norm_close"] = np.allclose(norm(X), norm_compiled(X), atol=1E-6)
  out["norm"] = norm_compiled(X)[:3]

  x = jnp.array(np.random.randn(10))
  out["get_negatives"] = get_negatives(x)
  try:
    jit(get_negatives)(x)
    out["jit_get_negatives_raised"] = False
  except Exception:
    out["jit_get_negatives_raised"] = True

  x = np.random.randn(3, 4)
  y = np.random.randn(4)
  out["f"] = f(x, y)

  try:
    jit(g)(1.0, True)
    out["jit_g_raised"] = False
  except TypeError:
    out["jit_g_raised"] = True
  from functools import partial
  out["static_g"] = jit(g, static_argnums=(1,))(1.0, True)
  out["static_g_partial"] = partial(jit, static_argnums=(1,))(g)(1.0, False)

  y = random.normal(key, shape=(50,))
  window = jnp.ones(10) / 10
  out["smooth"] = jnp.convolve(jnp.sin(x_jnp[:50]) + 0.2 * y, window, mode='same')
  return out
