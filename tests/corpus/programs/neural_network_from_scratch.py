# Source: "Training a simple neural network, with tensorflow/datasets data loading"
# (docs/notebooks/neural_network_with_tfds_data.ipynb), jax.readthedocs.io
# Copyright 2018 The JAX Authors. Licensed under the Apache License, Version 2.0.
# Ported to mirax by its imports only. For the corpus: synthetic 8x8 "images" of 10 classes
# in place of tfds MNIST, smaller layers, 2 epochs; the cells wrapped in main().
import time

import numpy as np

import mirax.numpy as jnp
from mirax import grad, jit, vmap
from mirax import random
from mirax.scipy.special import logsumexp


# A helper function to randomly initialize weights and biases
# for a dense neural network layer
def random_layer_params(m, n, key, scale=1e-2):
  w_key, b_key = random.split(key)
  return scale * random.normal(w_key, (n, m)), scale * random.normal(b_key, (n,))


# Initialize all layers for a fully-connected neural network with sizes "sizes"
def init_network_params(sizes, key):
  keys = random.split(key, len(sizes))
  return [random_layer_params(m, n, k) for m, n, k in zip(sizes[:-1], sizes[1:], keys)]


layer_sizes = [64, 32, 32, 10]
step_size = 0.5
num_epochs = 2
batch_size = 64
n_targets = 10


def relu(x):
  return jnp.maximum(0, x)


def predict(params, image):
  # per-example predictions
  activations = image
  for w, b in params[:-1]:
    outputs = jnp.dot(w, activations) + b
    activations = relu(outputs)

  final_w, final_b = params[-1]
  logits = jnp.dot(final_w, activations) + final_b
  return logits - logsumexp(logits)


# Make a batched version of the `predict` function
batched_predict = vmap(predict, in_axes=(None, 0))


def one_hot(x, k, dtype=jnp.float32):
  """Create a one-hot encoding of x of size k."""
  return jnp.array(x[:, None] == jnp.arange(k), dtype)


def accuracy(params, images, targets):
  target_class = jnp.argmax(targets, axis=1)
  predicted_class = jnp.argmax(batched_predict(params, images), axis=1)
  return jnp.mean(predicted_class == target_class)


def loss(params, images, targets):
  preds = batched_predict(params, images)
  return -jnp.mean(preds * targets)


@jit
def update(params, x, y):
  grads = grad(loss)(params, x, y)
  return [(w - step_size * dw, b - step_size * db)
          for (w, b), (dw, db) in zip(params, grads)]


def get_train_batches(images, labels):
  for i in range(0, len(images), batch_size):
    yield images[i:i + batch_size], labels[i:i + batch_size]


def main():
  rng = np.random.RandomState(0)
  centers = rng.randn(10, 64).astype(np.float32)
  train_labels = rng.randint(0, 10, 512)
  train_images = centers[train_labels] + rng.randn(512, 64).astype(np.float32)
  test_labels = rng.randint(0, 10, 128)
  test_images = centers[test_labels] + rng.randn(128, 64).astype(np.float32)
  train_labels, test_labels = one_hot(train_labels, n_targets), one_hot(test_labels, n_targets)

  params = init_network_params(layer_sizes, random.key(0))
  # This works on single examples
  random_flattened_image = random.normal(random.key(1), (64,))
  preds = predict(params, random_flattened_image)
  print(preds.shape)
  out = {"single_preds": preds}
  # `batched_predict` has the same call signature as `predict`
  random_flattened_images = random.normal(random.key(1), (10, 64))
  out["batched_preds"] = batched_predict(params, random_flattened_images)

  for epoch in range(num_epochs):
    start_time = time.time()
    for x, y in get_train_batches(train_images, train_labels):
      params = update(params, x, y)
    epoch_time = time.time() - start_time

    train_acc = accuracy(params, train_images, train_labels)
    test_acc = accuracy(params, test_images, test_labels)
    print("Epoch {} in {:0.2f} sec".format(epoch, epoch_time))
    print("Training set accuracy {}".format(train_acc))
    print("Test set accuracy {}".format(test_acc))
    out[f"accuracy_{epoch}"] = (train_acc, test_acc)
  out["loss"] = loss(params, train_images, train_labels)
  out["final_w"] = params[-1][0]
  return out
