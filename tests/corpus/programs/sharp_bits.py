# Source: "JAX - The Sharp Bits" (docs/notebooks/Common_Gotchas_in_JAX.ipynb), jax.readthedocs.io
# Copyright 2019 The JAX Authors. Licensed under the Apache License, Version 2.0.
# Ported to mirax by its imports only; the cells that show an error are run inside
# try/except and record that they raised; the cells wrapped in main().
import numpy as np

import mirax as jax  # noqa: F401
import mirax.numpy as jnp
from mirax import jit
from mirax import lax
from mirax import random


# mirax.numpy takes lists where NumPy does; JAX refuses them (TypeError)
KNOWN_DIFFERENCES = {"list_sum_raised": "mirax accepts a list argument"}
EXPECTED_NAN = ("oob_fill",)


def impure_print_side_effect(x):
  print("Executing function")  # This is a side-effect
  return x


def main():
  out = {}
  # The side-effects appear during the first run
  print("First call: ", jit(impure_print_side_effect)(4.))

  # In-place updates
  jax_array = jnp.zeros((3, 3), dtype=jnp.float32)
  try:
    jax_array[1, :] = 1.0
    out["inplace_raised"] = False
  except Exception:
    out["inplace_raised"] = True
  updated_array = jax_array.at[1, :].set(1.0)
  print("updated array:\n", updated_array)
  out["updated"] = updated_array
  print("original array unchanged:\n", jax_array)
  jax_array = jnp.ones((5, 6))
  new_jax_array = jax_array.at[::2, 3:].add(7.)
  out["at_add"] = new_jax_array

  # Out-of-bounds indexing
  out["oob_index"] = jnp.arange(10)[11]
  out["oob_at_get"] = jnp.arange(10.0).at[11].get()
  out["oob_fill"] = jnp.arange(10.0).at[11].get(mode='fill', fill_value=jnp.nan)

  # Non-array inputs: NumPy vs. JAX
  try:
    jnp.sum([1, 2, 3])
    out["list_sum_raised"] = False
  except TypeError:
    out["list_sum_raised"] = True
  x = [1, 2, 3]
  out["array_sum"] = jnp.sum(jnp.array(x))

  # Random numbers
  key = random.key(0)
  key, subkey = random.split(key)
  out["normal"] = random.normal(subkey, shape=(1,))
  key, subkey = random.split(key)
  out["normal2"] = random.normal(subkey, shape=(1,))

  # Control flow
  def f(x):
    if x < 3:
      return 3. * x ** 2
    else:
      return -4 * x
  out["grad_python_if"] = [jax.grad(f)(2.), jax.grad(f)(4.)]

  def g(x, n):
    y = 0.
    for i in range(n):
      y = y + x[i]
    return y

  g = jit(g, static_argnames='n')
  out["static_loop"] = g(jnp.array([2., 3., 4.]), 2)
  out["cond"] = lax.cond(True, lambda x: x+1, lambda x: x-1, jnp.array([0.]))
  out["while"] = lax.while_loop(lambda x: x < 10, lambda x: x+1, 0)
  out["fori"] = lax.fori_loop(0, 10, lambda i, x: x+i, 0)

  # Dynamic shapes
  def nansum(x):
    mask = ~jnp.isnan(x)  # boolean mask selecting non-nan values
    x_without_nans = x[mask]
    return x_without_nans.sum()

  def nansum_2(x):
    mask = ~jnp.isnan(x)  # boolean mask selecting non-nan values
    return jnp.where(mask, x, 0).sum()

  x = jnp.array([1, 2, jnp.nan, 3, 4])
  out["nansum"] = nansum(x)
  out["nansum_2_jit"] = jax.jit(nansum_2)(x)
  try:
    jax.jit(nansum)(x)
    out["dynamic_shape_raised"] = False
  except Exception:
    out["dynamic_shape_raised"] = True

  # Double (64bit) precision: not enabled, so float64 requests give float32
  x = random.uniform(random.key(0), (1000,), dtype=jnp.float32)
  out["uniform_mean"] = x.mean()

  # Miscellaneous divergences from NumPy: weak types
  out["int_plus_float"] = jnp.add(1, 1.0)
  out["float32_times_np_scalar"] = jnp.ones(3, jnp.float32) * np.float64(0.5)
  out["divide"] = jnp.divide(jnp.arange(4), 2)
  return out
