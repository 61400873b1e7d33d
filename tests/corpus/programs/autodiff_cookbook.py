# Source: "The Autodiff Cookbook" (docs/notebooks/autodiff_cookbook.ipynb), jax.readthedocs.io
# Copyright 2018 The JAX Authors. Licensed under the Apache License, Version 2.0.
# Ported to mirax by its imports only; the check_grads cell (jax.test_util) is left out and
# the cells are wrapped in main() returning what they print.
import mirax.numpy as jnp
from mirax import grad, jit, vmap  # noqa: F401
from mirax import random
from mirax import value_and_grad
from mirax import jacfwd, jacrev
from mirax import jvp, vjp


def sigmoid(x):
    return 0.5 * (jnp.tanh(x / 2) + 1)


# Outputs probability of a label being true.
def predict(W, b, inputs):
    return sigmoid(jnp.dot(inputs, W) + b)


# Build a toy dataset.
inputs = jnp.array([[0.52, 1.12,  0.77],
                    [0.88, -1.08, 0.15],
                    [0.52, 0.06, -1.30],
                    [0.74, -2.49, 1.39]])
targets = jnp.array([True, True, False, True])


# Training loss is the negative log-likelihood of the training examples.
def loss(W, b):
    preds = predict(W, b, inputs)
    label_probs = preds * targets + (1 - preds) * (1 - targets)
    return -jnp.sum(jnp.log(label_probs))


def hessian(f):
    return jacfwd(jacrev(f))


def hvp(f, x, v):
    return grad(lambda x: jnp.vdot(grad(f)(x), v))(x)


def hvp_fwd_rev(f, primals, tangents):
    return jvp(grad(f), primals, tangents)[1]


def vmap_mjp(f, x, M):
    y, vjp_fun = vjp(f, x)
    outs, = vmap(vjp_fun)(M)
    return outs


def vmap_jmp(f, W, M):
    _jvp = lambda s: jvp(f, (W,), (s,))[1]  # noqa: E731
    return vmap(_jvp)(M)


def main():
    out = {}
    key = random.key(0)
    grad_tanh = grad(jnp.tanh)
    print(grad_tanh(2.0))
    out["tanh_derivatives"] = [grad_tanh(2.0), grad(grad(jnp.tanh))(2.0),
                               grad(grad(grad(jnp.tanh)))(2.0)]

    # Initialize random model coefficients
    key, W_key, b_key = random.split(key, 3)
    W = random.normal(W_key, (3,))
    b = random.normal(b_key, ())

    # Differentiate `loss` with respect to the first positional argument:
    W_grad = grad(loss, argnums=0)(W, b)
    print(f'{W_grad=}')
    # Since argnums=0 is the default, this does the same thing:
    W_grad = grad(loss)(W, b)
    b_grad = grad(loss, 1)(W, b)
    print(f'{b_grad=}')
    W_grad, b_grad = grad(loss, (0, 1))(W, b)
    out["W_grad"], out["b_grad"] = W_grad, b_grad

    def loss2(params_dict):
        preds = predict(params_dict['W'], params_dict['b'], inputs)
        label_probs = preds * targets + (1 - preds) * (1 - targets)
        return -jnp.sum(jnp.log(label_probs))

    out["dict_grad"] = grad(loss2)({'W': W, 'b': b})
    loss_value, Wb_grad = value_and_grad(loss, (0, 1))(W, b)
    print('loss value', loss_value)
    print('loss value', loss(W, b))
    out["loss_value"] = loss_value

    # Set a step size for finite differences calculations
    eps = 1e-4
    b_grad_numerical = (loss(W, b + eps / 2.) - loss(W, b - eps / 2.)) / eps
    print('b_grad_numerical', b_grad_numerical)
    key, subkey = random.split(key)
    vec = random.normal(subkey, W.shape)
    unitvec = vec / jnp.sqrt(jnp.vdot(vec, vec))
    W_grad_numerical = (loss(W + eps / 2. * unitvec, b) - loss(W - eps / 2. * unitvec, b)) / eps
    print('W_dirderiv_numerical', W_grad_numerical)
    print('W_dirderiv_autodiff', jnp.vdot(grad(loss)(W, b), unitvec))
    out["W_dirderiv_autodiff"] = jnp.vdot(grad(loss)(W, b), unitvec)

    # Isolate the function from the weight matrix to the predictions
    f = lambda W: predict(W, b, inputs)  # noqa: E731
    J = jacfwd(f)(W)
    print("jacfwd result, with shape", J.shape)
    out["jacfwd"] = J
    out["jacrev"] = jacrev(f)(W)
    H = hessian(f)(W)
    print("hessian, with shape", H.shape)
    out["hessian"] = H

    def g(X):
        return jnp.sum(jnp.tanh(X)**2)

    key, subkey1, subkey2 = random.split(key, 3)
    X = random.normal(subkey1, (6, 5))
    V = random.normal(subkey2, (6, 5))
    ans1 = hvp_fwd_rev(g, (X,), (V,))
    ans2 = jnp.tensordot(hessian(g)(X), V, 2)
    print(jnp.allclose(ans1, ans2, 1e-4, 1e-4))
    out["hvp"], out["hvp_close"] = ans1, jnp.allclose(ans1, ans2, 1e-4, 1e-4)
    out["hvp_rev_rev"] = hvp(g, X, V)

    key, subkey = random.split(key)
    v = random.normal(subkey, W.shape)
    # Push forward the vector `v` along `f` evaluated at `W`
    y, u = jvp(f, (W,), (v,))
    out["jvp"] = u
    y, vjp_fun = vjp(f, W)
    key, subkey = random.split(key)
    u = random.normal(subkey, y.shape)
    # Pull back the covector `u` along `f` evaluated at `W`
    v = vjp_fun(u)
    out["vjp"] = v
    key, subkey = random.split(key)
    U = random.normal(subkey, (5, 4))
    out["mjp"] = vmap_mjp(f, W, M=U)
    key, subkey = random.split(key)
    S = random.normal(subkey, (5, 3))
    out["jmp"] = vmap_jmp(f, W, M=S)
    return out
