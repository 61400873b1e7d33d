# Source: jax/examples/mnist_classifier_fromscratch.py, github.com/jax-ml/jax
# Copyright 2018 The JAX Authors. Licensed under the Apache License, Version 2.0.
# "A basic MNIST example using Numpy and JAX. The primary aim here is simplicity and minimal
# dependencies."
# Ported to mirax by its imports only. For the corpus: a synthetic data set in place of
# `datasets.mnist()` (10 Gaussian clusters of 64 features, one-hot labels), smaller layers,
# two epochs, and the script body wrapped in main() returning what it prints.
import time

import numpy.random as npr

import mirax as jax  # noqa: F401
from mirax import jit, grad
from mirax.scipy.special import logsumexp
import mirax.numpy as jnp


def init_random_params(scale, layer_sizes, rng=npr.RandomState(0)):  # noqa: B008
  return [(scale * rng.randn(m, n), scale * rng.randn(n))
          for m, n, in zip(layer_sizes[:-1], layer_sizes[1:])]


def predict(params, inputs):
  activations = inputs
  for w, b in params[:-1]:
    outputs = jnp.dot(activations, w) + b
    activations = jnp.tanh(outputs)

  final_w, final_b = params[-1]
  logits = jnp.dot(activations, final_w) + final_b
  return logits - logsumexp(logits, axis=1, keepdims=True)


def loss(params, batch):
  inputs, targets = batch
  preds = predict(params, inputs)
  return -jnp.mean(jnp.sum(preds * targets, axis=1))


def accuracy(params, batch):
  inputs, targets = batch
  target_class = jnp.argmax(targets, axis=1)
  predicted_class = jnp.argmax(predict(params, inputs), axis=1)
  return jnp.mean(predicted_class == target_class)


def synthetic_mnist(rng=npr.RandomState(1)):  # noqa: B008
  centers = rng.randn(10, 64).astype("float32")
  def make(n):
    labels = rng.randint(0, 10, n)
    images = (centers[labels] + rng.randn(n, 64)).astype("float32")
    return images, (labels[:, None] == range(10)).astype("float32")
  return make(512) + make(256)


def main():
  layer_sizes = [64, 32, 32, 10]
  param_scale = 0.1
  step_size = 0.01
  num_epochs = 2
  batch_size = 128

  train_images, train_labels, test_images, test_labels = synthetic_mnist()
  num_train = train_images.shape[0]
  num_complete_batches, leftover = divmod(num_train, batch_size)
  num_batches = num_complete_batches + bool(leftover)

  def data_stream():
    rng = npr.RandomState(0)
    while True:
      perm = rng.permutation(num_train)
      for i in range(num_batches):
        batch_idx = perm[i * batch_size:(i + 1) * batch_size]
        yield train_images[batch_idx], train_labels[batch_idx]
  batches = data_stream()

  @jit
  def update(params, batch):
    grads = grad(loss)(params, batch)
    return [(w - step_size * dw, b - step_size * db)
            for (w, b), (dw, db) in zip(params, grads)]

  params = init_random_params(param_scale, layer_sizes)
  out = {}
  for epoch in range(num_epochs):
    start_time = time.time()
    for _ in range(num_batches):
      params = update(params, next(batches))
    epoch_time = time.time() - start_time

    train_acc = accuracy(params, (train_images, train_labels))
    test_acc = accuracy(params, (test_images, test_labels))
    print(f"Epoch {epoch} in {epoch_time:0.2f} sec")
    print(f"Training set accuracy {train_acc}")
    print(f"Test set accuracy {test_acc}")
    out[f"train_acc_{epoch}"] = train_acc
    out[f"test_acc_{epoch}"] = test_acc
  out["train_loss"] = loss(params, (train_images, train_labels))
  out["last_layer"] = params[-1][0]
  return out
