# Source: "Generalized convolutions in JAX" (docs/notebooks/convolutions.ipynb),
# jax.readthedocs.io
# Copyright 2020 The JAX Authors. Licensed under the Apache License, Version 2.0.
# Ported to mirax by its imports only. For the corpus: a 40x38 image (blocks at 5 + 12k in
# place of 30 + 60k), no plots; the cells wrapped in main() returning what they show.
import numpy as np

import mirax.numpy as jnp
from mirax import lax
from mirax import grad


def main():
  out = {}
  x = np.linspace(0, 10, 500)
  np.random.seed(0)
  y = np.sin(x) + 0.2 * np.random.randn(500)
  window = np.ones(10) / 10
  y_smooth = jnp.convolve(y, window, mode='same')
  out["convolve_smooth"] = y_smooth

  # 2D kernel - HWIO layout
  kernel = jnp.zeros((3, 3, 3, 3), dtype=jnp.float32)
  kernel += jnp.array([[1, 1, 0],
                       [1, 0, -1],
                       [0, -1, -1]])[:, :, jnp.newaxis, jnp.newaxis]

  # NHWC layout
  img = jnp.zeros((1, 40, 38, 3), dtype=jnp.float32)
  for k in range(3):
    x = 5 + 12*k
    y = 4 + 12*k
    img = img.at[0, x:x+4, y:y+4, k].set(1.0)

  out["lax_conv"] = lax.conv(jnp.transpose(img, [0, 3, 1, 2]),    # lhs = NCHW image tensor
                             jnp.transpose(kernel, [3, 2, 0, 1]),  # rhs = OIHW conv kernel
                             (1, 1),  # window strides
                             'SAME')  # padding mode
  out["general_padding"] = lax.conv_with_general_padding(
      jnp.transpose(img, [0, 3, 1, 2]),    # lhs = NCHW image tensor
      jnp.transpose(kernel, [2, 3, 0, 1]),  # rhs = IOHW conv kernel tensor
      (1, 1),  # window strides
      ((2, 2), (2, 2)),  # general padding 2x2
      (1, 1),  # lhs/image dilation
      (1, 1))  # rhs/kernel dilation

  dn = lax.conv_dimension_numbers(img.shape,     # only ndim matters, not shape
                                  kernel.shape,  # only ndim matters, not shape
                                  ('NHWC', 'HWIO', 'NHWC'))  # the important bit
  print(dn)
  out["dn"] = [list(dn.lhs_spec), list(dn.rhs_spec), list(dn.out_spec)]
  out["same"] = lax.conv_general_dilated(img,     # lhs = image tensor
                                         kernel,  # rhs = conv kernel tensor
                                         (1, 1),  # window strides
                                         'SAME',  # padding mode
                                         (1, 1),  # lhs/image dilation
                                         (1, 1),  # rhs/kernel dilation
                                         dn)      # dimension_numbers
  out["valid"] = lax.conv_general_dilated(img, kernel, (1, 1), 'VALID', (1, 1), (1, 1), dn)
  out["strided"] = lax.conv_general_dilated(img, kernel, (2, 2), 'SAME', (1, 1), (1, 1), dn)
  out["dilated"] = lax.conv_general_dilated(img, kernel, (1, 1), 'VALID', (1, 1), (4, 4), dn)
  # transposed convolution: lhs dilation
  out["transposed"] = lax.conv_general_dilated(img, kernel, (1, 1), ((0, 0), (0, 0)),
                                               (2, 2), (1, 1), dn)

  # 1D convolutions
  kernel = np.array([1, 2, 3, 2, 1], dtype=np.float32)[:, None, None]  # WIO
  data = np.zeros((1, 50, 1), dtype=np.float32)                      # NWC
  for k in range(2):
    x = 10 + 20*k
    data[0, x:x+5, 0] = 1.0
  dn = lax.conv_dimension_numbers(data.shape, kernel.shape, ('NWC', 'WIO', 'NWC'))
  out["conv_1d"] = lax.conv_general_dilated(data, kernel, (1,), 'SAME', (1,), (1,), dn)

  # gradient of a loss through the convolution, with respect to the kernel
  def loss(k):
    return jnp.sum(lax.conv_general_dilated(img, k, (1, 1), 'SAME', (1, 1), (1, 1),
                                            ('NHWC', 'HWIO', 'NHWC')) ** 2)
  out["kernel_grad"] = grad(loss)(jnp.ones((3, 3, 3, 3)) * 0.1)
  return out
