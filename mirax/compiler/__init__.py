"""The compiler: an ordered list of Graph -> Graph passes (pipeline.py)."""
from mirax.compiler.pipeline import optimize

__all__ = ["optimize"]
