# Source: "Control flow and logical operators with JIT" (docs/control-flow.md) and the
# jax.lax.scan docstring's cumulative sum, jax.readthedocs.io
# Copyright 2019 The JAX Authors. Licensed under the Apache License, Version 2.0.
# Ported to mirax by its imports only; the cells wrapped in main() returning what they print.
from functools import partial

import mirax as jax  # noqa: F401
import mirax.numpy as jnp
from mirax import grad, jit
from mirax import lax


def f(x):
  if x < 3:
    return 3. * x ** 2
  else:
    return -4 * x


@partial(jit, static_argnames=['x'])
def f_static(x):
  if x < 3:
    return 3. * x ** 2
  else:
    return -4 * x


def g(x, n):
  y = 0.
  for i in range(n):
    y = y + x[i]
  return y


def example_fun(length, val):
  return jnp.ones((length,)) * val


@partial(jit, static_argnums=(0,))
def example_fun_static(length, val):
  return jnp.ones((length,)) * val


def cumsum(res, el):
  """- `res`: The result from the previous loop.
  - `el`: The current array element."""
  res = res + el
  return res, res  # ("carry", "y")


def func(x):
  return x * (x > 0)


def logical_func(x):
  return jnp.logical_and(x > 0, x < 5)


def main():
  out = {"grad_if": [grad(f)(2.), grad(f)(4.)], "f_static": f_static(2.)}
  out["g_static"] = jit(g, static_argnames='n')(jnp.array([2., 3., 4.]), 2)
  out["example_fun"] = example_fun(10, 4)
  out["example_fun_static"] = example_fun_static(5, 4)

  operand = jnp.array([0.])
  out["cond_true"] = lax.cond(True, lambda x: x+1, lambda x: x-1, operand)
  out["cond_false"] = lax.cond(False, lambda x: x+1, lambda x: x-1, operand)
  out["cond_jit"] = jit(lambda p, x: lax.cond(p, lambda x: x+1, lambda x: x-1, x))(
      jnp.array(False), operand)
  out["switch"] = [lax.switch(i, [lambda x: x + 1, lambda x: x * 2, lambda x: -x], 3.)
                   for i in (-1, 0, 1, 2, 7)]

  init_val = 0
  cond_fun = lambda x: x < 10  # noqa: E731
  body_fun = lambda x: x+1  # noqa: E731
  out["while_loop"] = lax.while_loop(cond_fun, body_fun, init_val)

  init_val = 0
  start = 0
  stop = 10
  body_fun = lambda i, x: x+i  # noqa: E731
  out["fori_loop"] = lax.fori_loop(start, stop, body_fun, init_val)

  array = jnp.arange(10)
  result_init = 0
  final_res, result = lax.scan(cumsum, result_init, array)
  print("scan result:", result)
  print("final_res:", final_res)
  out["scan"] = (final_res, result)
  out["scan_reverse"] = lax.scan(cumsum, 0., jnp.arange(5.), reverse=True)
  out["fori_grad"] = grad(lambda x: lax.fori_loop(0, 4, lambda i, c: c * x + i, 1.0))(1.5)
  out["scan_grad"] = grad(lambda x: lax.scan(lambda c, e: (c * e, c), x, jnp.arange(1., 4.))[0])(2.)

  out["func_grad"] = grad(func)(5.)
  out["logical"] = logical_func(jnp.arange(-2., 8.))
  out["where"] = jnp.where(jnp.arange(-3, 3) > 0, 1.0, -jnp.arange(6.))
  out["select"] = lax.select(jnp.array([True, False]), jnp.ones(2), jnp.zeros(2))
  out["map"] = lax.map(lambda x: x ** 2 + 1, jnp.arange(4.))
  return out
