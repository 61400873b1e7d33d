# Source: "Just-in-time compilation" tutorial (docs/jit-compilation.md, formerly JAX 101
# "Just In Time Compilation with JAX"), jax.readthedocs.io
# Copyright 2021 The JAX Authors. Licensed under the Apache License, Version 2.0.
# Ported to mirax by its imports only. For the corpus: a smaller input; the cells that show
# an error run inside try/except and record that they raised; the cells wrapped in main().
from functools import partial

import mirax as jax
import mirax.numpy as jnp

global_list = []


def log2(x):
  global_list.append(x)
  ln_x = jnp.log(x)
  ln_2 = jnp.log(2.0)
  return ln_x / ln_2


def selu(x, alpha=1.67, lambda_=1.05):
  return lambda_ * jnp.where(x > 0, x, alpha * jnp.exp(x) - alpha)


# Condition on value of x.
def f(x):
  if x > 0:
    return x
  else:
    return 2 * x


# While loop conditioned on x and n.
def g(x, n):
  i = 0
  while i < n:
    i += 1
  return x + i


@jax.jit
def loop_body(prev_i):
  return prev_i + 1


def g_inner_jitted(x, n):
  i = 0
  while i < n:
    # Only JIT the inner loop body
    i = loop_body(i)
  return x + i


@partial(jax.jit, static_argnames=['n'])
def g_jit_decorated(x, n):
  i = 0
  while i < n:
    i += 1
  return x + i


def unjitted_loop_body(prev_i):
  return prev_i + 1


def main():
  out = {"log2": log2(3.0), "log2_jit": jax.jit(log2)(3.0)}
  x = jnp.arange(10000)
  selu_jit = jax.jit(selu)
  out["selu"] = selu(x)
  out["selu_jit"] = selu_jit(x).block_until_ready()
  for name, fn, args in (("f", f, (10,)), ("g", g, (10, 20))):
    try:
      jax.jit(fn)(*args)
      out[f"jit_{name}_raised"] = False
    except TypeError:                       # a ConcretizationTypeError
      out[f"jit_{name}_raised"] = True
  out["g_inner_jitted"] = g_inner_jitted(10, 20)
  f_jit_correct = jax.jit(f, static_argnums=0)
  out["f_static"] = f_jit_correct(10)
  g_jit_correct = jax.jit(g, static_argnames=['n'])
  out["g_static"] = g_jit_correct(10, 20)
  out["g_decorated"] = g_jit_decorated(10, 20)
  out["partial_jit"] = jax.jit(partial(unjitted_loop_body))(10)
  return out
