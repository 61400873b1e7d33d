# Source: jax/examples/mnist_vae.py, github.com/jax-ml/jax
# Copyright 2018 The JAX Authors. Licensed under the Apache License, Version 2.0.
# "A basic variational autoencoder (VAE) on binarized MNIST using Numpy and JAX."
# Ported to mirax by its imports, and ADAPTED: the original builds the encoder / decoder
# with jax.example_libraries.stax and trains with example_libraries.optimizers.momentum,
# which mirax does not have; minimal equivalents of those few pieces are written below
# (marked). Everything else (the model's math, binarize_batch, the fori_loop epoch, the
# evaluation) is the original. For the corpus: synthetic 8x8 images, hidden width 32,
# 2 epochs, a 2x2 sample grid, no image files.
import time

import numpy as np

import mirax as jax
import mirax.numpy as jnp
from mirax import jit, grad, lax, random
from mirax.nn import relu, softplus


def gaussian_kl(mu, sigmasq):
  """KL divergence from a diagonal Gaussian to the standard Gaussian."""
  return -0.5 * jnp.sum(1. + jnp.log(sigmasq) - mu**2. - sigmasq)


def gaussian_sample(rng, mu, sigmasq):
  """Sample a diagonal Gaussian."""
  return mu + jnp.sqrt(sigmasq) * random.normal(rng, mu.shape)


def bernoulli_logpdf(logits, x):
  """Bernoulli log pdf of data x given logits."""
  return -jnp.sum(jnp.logaddexp(0., jnp.where(x, -1., 1.) * logits))


def elbo(rng, params, images):
  """Monte Carlo estimate of the negative evidence lower bound."""
  enc_params, dec_params = params
  mu_z, sigmasq_z = encode(enc_params, images)
  logits_x = decode(dec_params, gaussian_sample(rng, mu_z, sigmasq_z))
  return bernoulli_logpdf(logits_x, images) - gaussian_kl(mu_z, sigmasq_z)


def image_sample(rng, params, nrow, ncol):
  """Sample images from the generative model."""
  _, dec_params = params
  code_rng, img_rng = random.split(rng)
  logits = decode(dec_params, random.normal(code_rng, (nrow * ncol, 10)))
  sampled_images = random.bernoulli(img_rng, jnp.logaddexp(0., logits))
  return image_grid(nrow, ncol, sampled_images, (8, 8))


def image_grid(nrow, ncol, imagevecs, imshape):
  """Reshape a stack of image vectors into an image grid for plotting."""
  images = iter(imagevecs.reshape((-1,) + imshape))
  return jnp.vstack([jnp.hstack([next(images).T for _ in range(ncol)][::-1])
                     for _ in range(nrow)]).T


# --- adapted: in place of stax.serial(Dense(512), Relu, ..., FanOut(2), parallel(...)) -----
def dense_init(rng, n_in, n_out):
  w_rng, b_rng = random.split(rng)
  return (random.normal(w_rng, (n_in, n_out)) * jnp.sqrt(2. / (n_in + n_out)),
          random.normal(b_rng, (n_out,)) * 1e-6)


def encoder_init(rng, n_in, width=32):
  rngs = random.split(rng, 4)
  return [dense_init(rngs[0], n_in, width), dense_init(rngs[1], width, width),
          dense_init(rngs[2], width, 10), dense_init(rngs[3], width, 10)]


def encode(params, x):
  (w1, b1), (w2, b2), (wm, bm), (ws, bs) = params
  h = relu(jnp.dot(relu(jnp.dot(x, w1) + b1), w2) + b2)
  return jnp.dot(h, wm) + bm, softplus(jnp.dot(h, ws) + bs)


def decoder_init(rng, n_out, width=32):
  rngs = random.split(rng, 3)
  return [dense_init(rngs[0], 10, width), dense_init(rngs[1], width, width),
          dense_init(rngs[2], width, n_out)]


def decode(params, z):
  (w1, b1), (w2, b2), (w3, b3) = params
  return jnp.dot(relu(jnp.dot(relu(jnp.dot(z, w1) + b1), w2) + b2), w3) + b3


# --- adapted: in place of optimizers.momentum(step_size, mass=0.9) --------------------------
def momentum(step_size, mass):
  def init(x0):
    return x0, jax.tree.map(jnp.zeros_like, x0)

  def update(i, g, state):
    x, velocity = state
    velocity = jax.tree.map(lambda v, g: mass * v + g, velocity, g)
    x = jax.tree.map(lambda x, v: x - step_size * v, x, velocity)
    return x, velocity

  def get_params(state):
    return state[0]
  return init, update, get_params
# -------------------------------------------------------------------------------------------


def main():
  step_size = 0.001
  num_epochs = 2
  batch_size = 32
  nrow, ncol = 2, 2  # sampled image grid size

  test_rng = random.key(1)  # fixed prng key for evaluation

  data_rng = np.random.RandomState(0)
  protos = data_rng.rand(4, 64)
  train_images = protos[data_rng.randint(0, 4, 256)].astype(np.float32)
  test_images = protos[data_rng.randint(0, 4, 64)].astype(np.float32)
  num_complete_batches, leftover = divmod(train_images.shape[0], batch_size)
  num_batches = num_complete_batches + bool(leftover)

  enc_init_rng, dec_init_rng = random.split(random.key(2))
  init_encoder_params = encoder_init(enc_init_rng, 8 * 8)
  init_decoder_params = decoder_init(dec_init_rng, 8 * 8)
  init_params = init_encoder_params, init_decoder_params

  opt_init, opt_update, get_params = momentum(step_size, mass=0.9)
  train_images = jax.device_put(train_images)
  test_images = jax.device_put(test_images)

  def binarize_batch(rng, i, images):
    i = i % num_batches
    batch = lax.dynamic_slice_in_dim(images, i * batch_size, batch_size)
    return random.bernoulli(rng, batch)

  @jit
  def run_epoch(rng, opt_state, images):
    def body_fun(i, opt_state):
      elbo_rng, data_rng = random.split(random.fold_in(rng, i))
      batch = binarize_batch(data_rng, i, images)
      loss = lambda params: -elbo(elbo_rng, params, batch) / batch_size  # noqa: E731
      g = grad(loss)(get_params(opt_state))
      return opt_update(i, g, opt_state)
    return lax.fori_loop(0, num_batches, body_fun, opt_state)

  @jit
  def evaluate(opt_state, images):
    params = get_params(opt_state)
    elbo_rng, data_rng, image_rng = random.split(test_rng, 3)
    binarized_test = random.bernoulli(data_rng, images)
    test_elbo = elbo(elbo_rng, params, binarized_test) / images.shape[0]
    sampled_images = image_sample(image_rng, params, nrow, ncol)
    return test_elbo, sampled_images

  opt_state = opt_init(init_params)
  out = {}
  for epoch in range(num_epochs):
    tic = time.time()
    opt_state = run_epoch(random.key(epoch), opt_state, train_images)
    test_elbo, sampled_images = evaluate(opt_state, test_images)
    print(f"{epoch: 3d} {test_elbo} ({time.time() - tic:.3f} sec)")
    out[f"test_elbo_{epoch}"] = test_elbo
  out["sampled_images_shape"] = list(sampled_images.shape)
  out["decoder_bias"] = get_params(opt_state)[1][-1][1]
  return out
