# Source: "Automatic vectorization" tutorial (docs/automatic-vectorization.md, formerly JAX 101
# "Automatic Vectorization in JAX"), jax.readthedocs.io
# Copyright 2021 The JAX Authors. Licensed under the Apache License, Version 2.0.
# Ported to mirax by its imports only; the cells wrapped in main() returning what they print.
import mirax as jax
import mirax.numpy as jnp

x = jnp.arange(5)
w = jnp.array([2., 3., 4.])


def convolve(x, w):
  output = []
  for i in range(1, len(x)-1):
    output.append(jnp.dot(x[i-1:i+2], w))
  return jnp.array(output)


xs = jnp.stack([x, x])
ws = jnp.stack([w, w])


def manually_batched_convolve(xs, ws):
  output = []
  for i in range(xs.shape[0]):
    output.append(convolve(xs[i], ws[i]))
  return jnp.stack(output)


def manually_vectorized_convolve(xs, ws):
  output = []
  for i in range(1, xs.shape[-1] -1):
    output.append(jnp.sum(xs[:, i-1:i+2] * ws, axis=1))
  return jnp.stack(output, axis=1)


def main():
  out = {"convolve": convolve(x, w),
         "manually_batched": manually_batched_convolve(xs, ws),
         "manually_vectorized": manually_vectorized_convolve(xs, ws)}
  auto_batch_convolve = jax.vmap(convolve)
  out["auto_batch"] = auto_batch_convolve(xs, ws)
  xst = jnp.transpose(xs)
  wst = jnp.transpose(ws)
  auto_batch_convolve_v2 = jax.vmap(convolve, in_axes=1, out_axes=1)
  out["auto_batch_v2"] = auto_batch_convolve_v2(xst, wst)
  batch_convolve_v3 = jax.vmap(convolve, in_axes=[0, None])
  out["batch_v3"] = batch_convolve_v3(xs, w)
  jitted_batch_convolve = jax.jit(auto_batch_convolve)
  out["jitted"] = jitted_batch_convolve(xs, ws)
  out["grad_through_list"] = jax.grad(lambda w: convolve(x, w).sum())(w)
  return out
