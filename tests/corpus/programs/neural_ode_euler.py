# Written for this corpus (not a copy of a public program) in the style of the JAX
# documentation's lax.scan / jax.random / pytree examples: a neural ODE integrated with a
# fixed-step Euler scheme, fit to a spiral by gradient descent through lax.scan, batched
# over initial conditions with vmap. Licensed under the Apache License, Version 2.0.
# Uses only `import mirax as jax` / `import mirax.numpy as jnp` (the JAX run swaps them).
import mirax as jax
import mirax.numpy as jnp


def init_mlp(key, sizes):
  keys = jax.random.split(key, len(sizes) - 1)
  return [dict(w=jax.random.normal(k, (m, n)) / jnp.sqrt(m), b=jnp.zeros(n))
          for k, m, n in zip(keys, sizes[:-1], sizes[1:])]


def dynamics(params, y, t):
  h = jnp.concatenate([y, jnp.array([t])])
  for layer in params[:-1]:
    h = jnp.tanh(h @ layer['w'] + layer['b'])
  return h @ params[-1]['w'] + params[-1]['b']


def odeint_euler(f, y0, ts, *args):
  def step(y, t_pair):
    t0, t1 = t_pair
    y = y + (t1 - t0) * f(*args, y, t0)
    return y, y
  _, ys = jax.lax.scan(step, y0, (ts[:-1], ts[1:]))
  return jnp.concatenate([y0[None], ys])


def true_dynamics(y, t):
  A = jnp.array([[-0.1, 2.0], [-2.0, -0.1]])
  return (y ** 3) @ A


def loss(params, y0s, ts, targets):
  preds = jax.vmap(lambda y0: odeint_euler(dynamics, y0, ts, params))(y0s)
  return jnp.mean((preds - targets) ** 2)


@jax.jit
def sgd_step(params, y0s, ts, targets, lr=0.05):
  value, grads = jax.value_and_grad(loss)(params, y0s, ts, targets)
  return jax.tree.map(lambda p, g: p - lr * g, params, grads), value


def main():
  key = jax.random.key(0)
  key, k_params, k_y0 = jax.random.split(key, 3)
  ts = jnp.linspace(0., 1., 21)
  y0s = jnp.array([[1., 0.]]) + 0.1 * jax.random.normal(k_y0, (4, 2))
  targets = jax.vmap(lambda y0: odeint_euler(lambda y, t: true_dynamics(y, t), y0, ts))(y0s)
  params = init_mlp(k_params, [3, 16, 2])
  losses = []
  for _ in range(15):
    params, value = sgd_step(params, y0s, ts, targets)
    losses.append(value)
  return {"targets_end": targets[:, -1], "losses": jnp.stack(losses),
          "final_loss": loss(params, y0s, ts, targets),
          "trajectory": odeint_euler(dynamics, y0s[0], ts, params)[::5]}
