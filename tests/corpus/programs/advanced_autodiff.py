# Source: "Advanced automatic differentiation" (docs/advanced-autodiff.md: stop_gradient,
# straight-through estimator, per-example gradients, Hessian-vector products), jax.readthedocs.io
# Copyright 2024 The JAX Authors. Licensed under the Apache License, Version 2.0.
# Ported to mirax by its imports only; the cells wrapped in main() returning what they print.
import mirax as jax
import mirax.numpy as jnp
from mirax import grad, jvp, jacfwd, jacrev, vmap

# Value function and initial parameters
value_fn = lambda theta, state: jnp.dot(theta, state)  # noqa: E731
theta = jnp.array([0.1, -0.1, 0.])

# An example transition.
s_tm1 = jnp.array([1., 2., -1.])
r_t = jnp.array(1.)
s_t = jnp.array([2., 1., 0.])


def td_loss(theta, s_tm1, r_t, s_t):
  v_tm1 = value_fn(theta, s_tm1)
  target = r_t + value_fn(theta, s_t)
  return -0.5 * ((jax.lax.stop_gradient(target) - v_tm1) ** 2)


def f(x):
  return jnp.round(x)  # non-differentiable


def straight_through_f(x):
  # Create an exactly-zero expression with Sterbenz lemma that has
  # an exactly-one gradient.
  zero = x - jax.lax.stop_gradient(x)
  return zero + jax.lax.stop_gradient(f(x))


def hvp(f, x, v):
  return grad(lambda x: jnp.vdot(grad(f)(x), v))(x)


def hvp_fwd_rev(f, primals, tangents):
  return jvp(grad(f), primals, tangents)[1]


def hessian(f):
  return jacfwd(jacrev(f))


def main():
  out = {}
  td_update = jax.grad(td_loss)
  delta_theta = td_update(theta, s_tm1, r_t, s_t)
  out["td_update"] = delta_theta

  print("f(x): ", f(3.2))
  print("straight_through_f(x):", straight_through_f(3.2))
  print("grad(f)(x):", jax.grad(f)(3.2))
  print("grad(straight_through_f)(x):", jax.grad(straight_through_f)(3.2))
  out["straight_through"] = [f(3.2), straight_through_f(3.2), jax.grad(f)(3.2),
                             jax.grad(straight_through_f)(3.2)]

  perex_grads = jax.jit(jax.vmap(jax.grad(td_loss), in_axes=(None, 0, 0, 0)))
  batched_s_tm1 = jnp.stack([s_tm1, s_tm1])
  batched_r_t = jnp.stack([r_t, r_t])
  batched_s_t = jnp.stack([s_t, s_t])
  out["per_example"] = perex_grads(theta, batched_s_tm1, batched_r_t, batched_s_t)
  dtdloss_dtheta = jax.grad(td_loss)
  inefficient_perex_grads = jax.vmap(dtdloss_dtheta, in_axes=(None, 0, 0, 0))
  out["per_example_no_jit"] = inefficient_perex_grads(theta, batched_s_tm1, batched_r_t,
                                                      batched_s_t)

  def g(X):
    return jnp.sum(jnp.tanh(X) ** 2)

  key, subkey1, subkey2 = jax.random.split(jax.random.key(0), 3)
  X = jax.random.normal(subkey1, (4, 5))
  V = jax.random.normal(subkey2, (4, 5))
  out["hvp"] = hvp(g, X, V)
  out["hvp_fwd_rev"] = hvp_fwd_rev(g, (X,), (V,))
  out["hvp_hessian"] = jnp.tensordot(hessian(g)(X), V, 2)
  # Jacobian of a function of a matrix, and the vmap-of-jvp Jacobian-matrix product
  h = lambda W: jnp.tanh(W @ X)  # noqa: E731
  W = jnp.ones((3, 4)) * 0.1
  out["jacrev_matrix"] = jacrev(h)(W)
  out["jmp"] = vmap(lambda s: jvp(h, (W,), (s,))[1])(jnp.stack([W, 2 * W]))
  return out
