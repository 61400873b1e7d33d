# Source: "JAX Quickstart" (docs/quickstart.md / notebooks/quickstart.ipynb), jax.readthedocs.io
# Copyright 2018 The JAX Authors. Licensed under the Apache License, Version 2.0.
# Ported to mirax by its imports only. For the corpus: smaller sizes, no %timeit, and the
# notebook cells wrapped in main() returning what they print.
import mirax.numpy as jnp
from mirax import grad, jit, vmap
from mirax import random
from mirax import jacfwd, jacrev


def selu(x, alpha=1.67, lmbda=1.05):
  return lmbda * jnp.where(x > 0, x, alpha * jnp.exp(x) - alpha)


def sum_logistic(x):
  return jnp.sum(1.0 / (1.0 + jnp.exp(-x)))


def first_finite_differences(f, x):
  eps = 1e-3
  return jnp.array([(f(x + eps * v) - f(x - eps * v)) / (2 * eps)
                    for v in jnp.eye(len(x))])


def hessian(fun):
  return jit(jacfwd(jacrev(fun)))


def main():
  out = {}
  key = random.key(0)
  x = random.normal(key, (10,))
  print(x)
  out["normal"] = x

  size = 300
  x = random.normal(key, (size, size), dtype=jnp.float32)
  out["dot"] = jnp.dot(x, x.T).block_until_ready()[:3, :3]

  x = random.normal(key, (1000,))
  selu(x).block_until_ready()
  selu_jit = jit(selu)
  out["selu_jit"] = selu_jit(x).block_until_ready()

  x_small = jnp.arange(3.)
  derivative_fn = grad(sum_logistic)
  print(derivative_fn(x_small))
  out["grad"] = derivative_fn(x_small)
  print(first_finite_differences(sum_logistic, x_small))
  out["finite_differences"] = first_finite_differences(sum_logistic, x_small)
  print(grad(jit(grad(jit(grad(sum_logistic)))))(1.0))
  out["third_derivative"] = grad(jit(grad(jit(grad(sum_logistic)))))(1.0)
  out["hessian"] = hessian(sum_logistic)(x_small)

  mat = random.normal(key, (150, 100))
  batched_x = random.normal(key, (10, 100))

  def apply_matrix(v):
    return jnp.dot(mat, v)

  def naively_batched_apply_matrix(v_batched):
    return jnp.stack([apply_matrix(v) for v in v_batched])

  @jit
  def batched_apply_matrix(v_batched):
    return jnp.dot(v_batched, mat.T)

  @jit
  def vmap_batched_apply_matrix(v_batched):
    return vmap(apply_matrix)(v_batched)

  out["naive"] = naively_batched_apply_matrix(batched_x)
  out["manual"] = batched_apply_matrix(batched_x)
  out["vmap"] = vmap_batched_apply_matrix(batched_x)
  return out
