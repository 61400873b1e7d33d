"""mirax.nn: neural-network functions (functional.py) and, in modules.py, Modules.
`mx.nn.initializers` is `mx.nn.init` (also importable as the module mirax.nn.initializers)."""
import sys as _sys
from mirax.nn.functional import (  # noqa: F401
    avg_pool2d, celu, conv2d, conv_general_dilated, dot_product_attention, dropout, elu,
    embedding, fake_quantize, gelu, glu, hard_sigmoid, hard_silu, hard_swish, hard_tanh,
    identity, index_add, index_select, layer_norm, leaky_relu, log1mexp, log_sigmoid,
    log_softmax, logmeanexp, logsumexp, max_pool2d, mish, one_hot, relu, relu6, rms_norm,
    segment_max, segment_mean, segment_softmax, segment_sum, selu, sigmoid, silu, softmax,
    softmax_cross_entropy, soft_sign, softplus, sparse_plus, sparse_sigmoid, squareplus,
    standardize, ste_round, ste_sign, swish, tanh)
from mirax.nn import functional  # noqa: F401
from mirax.nn import init  # noqa: F401
from mirax.nn import init as initializers  # noqa: F401  (jax.nn.initializers' name)
from mirax.nn.modules import (  # noqa: F401
    MLP, Conv2d, Dropout, Embedding, Lambda, LayerNorm, Linear, Module, MultiHeadAttention,
    RMSNorm, Sequential, static_field)

_sys.modules.setdefault(__name__ + ".initializers", init)

from mirax.core.errors import name_public_functions as _name_public  # noqa: E402

_name_public(globals(), [_n for _n in dir() if not _n.startswith("_")])  # errors name the op
