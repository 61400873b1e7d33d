# Source: "Pseudorandom numbers" (docs/random-numbers.md), jax.readthedocs.io
# Copyright 2024 The JAX Authors. Licensed under the Apache License, Version 2.0.
# Ported to mirax by its imports only; the cells wrapped in main() returning what they print.
import numpy as np

import mirax as jax  # noqa: F401
import mirax.numpy as jnp
from mirax import random


def main():
  out = {}
  np.random.seed(0)
  out["numpy_draw"] = np.random.random()

  key = random.key(42)
  print(key)
  print(random.normal(key))
  print(random.normal(key))
  out["same_key_twice"] = [random.normal(key), random.normal(key)]

  draws = []
  for i in range(3):
    new_key, subkey = random.split(key)
    del key  # The old key is consumed by split() -- we must never use it again.

    val = random.normal(subkey)
    del subkey  # The subkey is consumed by normal().

    print(f"draw {i}: {val}")
    draws.append(val)
    key = new_key  # new_key is safe to use in the next iteration.
  out["draws"] = draws

  key, *forty_two_subkeys = random.split(key, num=43)
  out["subkey_draw"] = random.uniform(forty_two_subkeys[41])

  key = random.key(42)
  subkeys = random.split(key, 3)
  sequence = np.stack([random.normal(subkey) for subkey in subkeys])
  print("individually:", sequence)
  key = random.key(42)
  print("all at once: ", random.normal(key, shape=(3,)))
  out["individually"] = sequence
  out["all_at_once"] = random.normal(key, shape=(3,))

  key = random.key(0)
  k1, k2, k3, k4, k5, k6 = random.split(key, 6)
  out["uniform"] = random.uniform(k1, (4,), minval=-1., maxval=2.)
  out["randint"] = random.randint(k2, (6,), 0, 10)
  out["bernoulli"] = random.bernoulli(k3, 0.3, (8,))
  out["permutation"] = random.permutation(k4, 10)
  out["fold_in"] = random.normal(random.fold_in(k5, 7), (2,))
  out["categorical"] = random.categorical(k6, jnp.log(jnp.array([0.1, 0.2, 0.7])), shape=(8,))
  out["truncated_normal"] = random.truncated_normal(k1, -1., 1., (4,))
  out["choice"] = random.choice(k2, 5, (3,), replace=False)
  return out
