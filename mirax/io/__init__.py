"""mirax.io: checkpoints (safetensors) and DLPack interop."""
from mirax.io.checkpoint import load, save  # noqa: F401
from mirax.io.dlpack import to_dlpack  # noqa: F401
