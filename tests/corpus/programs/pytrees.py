# Source: "Working with pytrees" (docs/working-with-pytrees.md, formerly JAX 101 "Working with
# Pytrees"), jax.readthedocs.io
# Copyright 2021 The JAX Authors. Licensed under the Apache License, Version 2.0.
# Ported to mirax by its imports only. For the corpus: np.random.seed(0) first (both runs see
# the same data), smaller layers and 50 steps; the cells wrapped in main().
from typing import Any, NamedTuple

import numpy as np

import mirax as jax
import mirax.numpy as jnp


def init_mlp_params(layer_widths):
  params = []
  for n_in, n_out in zip(layer_widths[:-1], layer_widths[1:]):
    params.append(
        dict(weights=np.random.normal(size=(n_in, n_out)) * np.sqrt(2/n_in),
             biases=np.ones(shape=(n_out,))
            )
    )
  return params


def forward(params, x):
  *hidden, last = params
  for layer in hidden:
    x = jax.nn.relu(x @ layer['weights'] + layer['biases'])
  return x @ last['weights'] + last['biases']


def loss_fn(params, x, y):
  return jnp.mean((forward(params, x) - y) ** 2)


LEARNING_RATE = 0.0001


@jax.jit
def update(params, x, y):
  grads = jax.grad(loss_fn)(params, x, y)
  # Note that `grads` is a pytree with the same structure as `params`.
  # `jax.grad` is one of many JAX functions that has
  # built-in support for pytrees.
  # This is handy, because you can apply the SGD update using tree utils:
  return jax.tree.map(
      lambda p, g: p - LEARNING_RATE * g, params, grads
  )


class MyContainer:
  """A named container."""

  def __init__(self, name: str, a: int, b: int, c: int):
    self.name = name
    self.a = a
    self.b = b
    self.c = c


def flatten_MyContainer(container) -> tuple[list[int], str]:
  """Returns an iterable over container contents, and aux data."""
  flat_contents = [container.a, container.b, container.c]
  # we don't want the name to appear as a child, so it is auxiliary data.
  # auxiliary data is usually a description of the structure of a node,
  # e.g., the keys of a dict -- anything that isn't a node's children.
  aux_data = container.name
  return flat_contents, aux_data


def unflatten_MyContainer(
    aux_data: str, flat_contents: list[int]) -> MyContainer:
  """Converts aux data and the flat contents into a MyContainer."""
  return MyContainer(aux_data, *flat_contents)


jax.tree_util.register_pytree_node(
    MyContainer, flatten_MyContainer, unflatten_MyContainer)


class MyOtherContainer(NamedTuple):
  name: str
  a: Any
  b: Any
  c: Any


def main():
  np.random.seed(0)
  out = {}
  example_trees = [
      [1, 'a', object()],
      (1, (2, 3), ()),
      [1, {'k1': 2, 'k2': (3, 4)}, 5],
      {'a': 2, 'b': (2, 3)},
      jnp.array([1, 2, 3]),
  ]
  out["num_leaves"] = [len(jax.tree.leaves(t)) for t in example_trees]
  list_of_lists = [[1, 2, 3], [1, 2], [1, 2, 3, 4]]
  out["tree_map"] = jax.tree.map(lambda x: x*2, list_of_lists)
  another_list_of_lists = list_of_lists
  out["tree_map2"] = jax.tree.map(lambda x, y: x+y, list_of_lists, another_list_of_lists)

  params = init_mlp_params([1, 32, 32, 1])
  out["shapes"] = [str(s) for s in jax.tree.leaves(jax.tree.map(lambda x: x.shape, params))]
  xs = np.random.normal(size=(128, 1))
  ys = xs ** 2
  for _ in range(50):
    params = update(params, xs, ys)
  out["loss"] = loss_fn(params, xs, ys)
  out["prediction"] = forward(params, xs[:5])

  leaves = jax.tree.leaves([
      MyContainer('Alice', 1, 2, 3),
      MyContainer('Bob', 4, 5, 6)
  ])
  out["custom_leaves"] = leaves
  mapped = jax.tree.map(lambda x: x + 1, [
      MyContainer('Alice', 1, 2, 3),
      MyContainer('Bob', 4, 5, 6)
  ])
  out["custom_map_names"] = [c.name for c in mapped]
  out["custom_map_values"] = [[c.a, c.b, c.c] for c in mapped]
  out["namedtuple_leaves"] = jax.tree.leaves([
      MyOtherContainer('Alice', 1, 2, 3),
      MyOtherContainer('Bob', 4, 5, 6)
  ])
  out["none_leaves"] = len(jax.tree.leaves([None, None, None]))
  a_tree = [jnp.zeros((2, 3)), jnp.zeros((3, 4))]
  shapes = jax.tree.map(lambda x: x.shape, a_tree)
  out["shape_leaves"] = jax.tree.leaves(jax.tree.map(jnp.ones, shapes))
  return out
