"""Errors users see. Messages name the operation, what was expected and what came."""


class MiraxError(Exception):
    pass


class ConcretizationError(MiraxError, TypeError):
    """A concrete Python value (bool, int, float, shape) was asked of a traced value."""


class UnexpectedTracerError(MiraxError):
    """A value traced in a transform escaped it and was used after the transform ended."""


class ShapeError(MiraxError, TypeError, ValueError):
    """Operands whose shapes (or ranks) do not fit the operation.

    JAX raises TypeError for these and NumPy ValueError; code written for either catches
    its own class, so this error is both."""


class DTypeError(MiraxError, TypeError, ValueError):
    """Operands whose dtypes do not fit the operation (a TypeError and a ValueError, as
    ShapeError)."""


# JAX's names for the concretization errors (jax.errors.*), so `except
# jax.errors.TracerBoolConversionError:` in a ported program catches mirax's error. mirax
# raises the one class for all of them: each name catches every concretization failure.
ConcretizationTypeError = ConcretizationError
TracerBoolConversionError = ConcretizationError
TracerIntegerConversionError = ConcretizationError
TracerArrayConversionError = ConcretizationError
