"""mirax.scipy: the parts of scipy that models use (special functions)."""
from mirax.scipy import special  # noqa: F401
