"""mirax.io: checkpoints (safetensors) and DLPack interop."""
from mirax.io.checkpoint import load, save  # noqa: F401
from mirax.io.dlpack import to_dlpack  # noqa: F401

from mirax.core.errors import name_public_functions as _name_public  # noqa: E402

_name_public(globals(), [_n for _n in dir() if not _n.startswith("_")])  # errors name the op
