"""Errors users see. Messages name the operation, what was expected and what came."""


class MiraxError(Exception):
    pass


class ConcretizationError(MiraxError, TypeError):
    """A concrete Python value (bool, int, float, shape) was asked of a traced value."""


class UnexpectedTracerError(MiraxError):
    """A value traced in a transform escaped it and was used after the transform ended."""
