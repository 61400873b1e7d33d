# Source: "Custom derivative rules for JAX-transformable Python functions"
# (docs/notebooks/Custom_derivative_rules_for_Python_code.ipynb), jax.readthedocs.io
# Copyright 2020 The JAX Authors. Licensed under the Apache License, Version 2.0.
# Ported to mirax by its imports only; the cells wrapped in main() returning what they print.
from functools import partial

import mirax as jax  # noqa: F401
import mirax.numpy as jnp
from mirax import custom_jvp, custom_vjp
from mirax import grad, jit, vmap, vjp
from mirax.lax import while_loop


@custom_jvp
def log1pexp(x):
  return jnp.log(1. + jnp.exp(x))


@log1pexp.defjvp
def log1pexp_jvp(primals, tangents):
  x, = primals
  x_dot, = tangents
  ans = log1pexp(x)
  ans_dot = (1 - 1/(1 + jnp.exp(x))) * x_dot
  return ans, ans_dot


@custom_jvp
def f(x, y):
  return jnp.sin(x) * y


@f.defjvp
def f_jvp(primals, tangents):
  x, y = primals
  x_dot, y_dot = tangents
  primal_out = f(x, y)
  tangent_out = jnp.cos(x) * x_dot * y + jnp.sin(x) * y_dot
  return primal_out, tangent_out


@custom_vjp
def clip_gradient(lo, hi, x):
  return x  # identity function


def clip_gradient_fwd(lo, hi, x):
  return x, (lo, hi)  # save bounds as residuals


def clip_gradient_bwd(res, g):
  lo, hi = res
  return (None, None, jnp.clip(g, lo, hi))  # use None to indicate zero cotangents for lo and hi


clip_gradient.defvjp(clip_gradient_fwd, clip_gradient_bwd)


def clip_sin(x):
  x = clip_gradient(-0.75, 0.75, x)
  return jnp.sin(x)


@partial(custom_vjp, nondiff_argnums=(0,))
def fixed_point(f, a, x_guess):
  def cond_fun(carry):
    x_prev, x = carry
    return jnp.abs(x_prev - x) > 1e-6

  def body_fun(carry):
    _, x = carry
    return x, f(a, x)

  _, x_star = while_loop(cond_fun, body_fun, (x_guess, f(a, x_guess)))
  return x_star


def fixed_point_fwd(f, a, x_init):
  x_star = fixed_point(f, a, x_init)
  return x_star, (a, x_star)


def fixed_point_rev(f, res, x_star_bar):
  a, x_star = res
  _, vjp_a = vjp(lambda a: f(a, x_star), a)
  a_bar, = vjp_a(fixed_point(partial(rev_iter, f),
                             (a, x_star, x_star_bar),
                             x_star_bar))
  return a_bar, jnp.zeros_like(x_star)


def rev_iter(f, packed, u):
  a, x_star, x_star_bar = packed
  _, vjp_x = vjp(lambda x: f(a, x), x_star)
  return x_star_bar + vjp_x(u)[0]


fixed_point.defvjp(fixed_point_fwd, fixed_point_rev)


def newton_sqrt(a):
  update = lambda a, x: 0.5 * (x + a / x)  # noqa: E731
  return fixed_point(update, a, a)


def main():
  out = {}
  print(grad(log1pexp)(100.))
  out["log1pexp_grad_100"] = grad(log1pexp)(100.)
  out["log1pexp_jit"] = jit(log1pexp)(3.)
  out["log1pexp_jit_grad"] = jit(grad(log1pexp))(3.)
  out["log1pexp_vmap"] = vmap(jit(grad(log1pexp)))(jnp.arange(3.))
  out["f_grad"] = grad(f)(2., 3.)
  out["f_jvp"] = jax.jvp(f, (2., 3.), (1., 0.5))
  t = jnp.linspace(0, 10, 100)
  out["clip_sin_grad"] = vmap(grad(clip_sin))(t)
  print(newton_sqrt(2.))
  out["newton_sqrt"] = newton_sqrt(2.)
  out["newton_sqrt_grad"] = grad(newton_sqrt)(2.)
  out["newton_sqrt_grad2"] = grad(grad(newton_sqrt))(2.)
  return out
