"""mirax.scipy: jax.scipy's namespaces: special functions, stats distributions, linalg and
signal."""
from mirax.scipy import special  # noqa: F401
from mirax.scipy import stats  # noqa: F401
from mirax.scipy import linalg  # noqa: F401
from mirax.scipy import signal  # noqa: F401
