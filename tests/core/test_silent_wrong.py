"""Regressions for answers that used to be silently wrong: each case is now right (checked
against JAX or NumPy) or raises a TypeError / ValueError naming the user's op."""
import numpy as np
import pytest

import mirax as mx
import mirax.numpy as mnp
from mirax.core.errors import DeletedArrayError


# --- donation -----------------------------------------------------------------------------
def test_donated_array_is_deleted_and_its_buffer_reused():
    f = mx.jit(lambda t: t * 2, donate_argnums=0)
    for _ in range(2):  # the first call traces, the second takes the cached fast path
        a = mnp.arange(3.) + 1
        addr = a._buf.ctypes.data
        y = f(a)
        np.testing.assert_array_equal(np.asarray(y), [2., 4., 6.])
        assert y._buf.ctypes.data == addr  # the donated buffer holds the result
        assert a.is_deleted() and a.shape == (3,) and a.dtype == np.float32
        for use in (lambda: np.asarray(a), lambda: a + 1, lambda: f(a), lambda: str(a)):
            with pytest.raises(DeletedArrayError, match=r"donated to jit\(<lambda>\) as "
                                                        r"argument 't'"):
                use()
        np.testing.assert_array_equal(np.asarray(y), [2., 4., 6.])  # y untouched


def test_donation_never_overwrites_memory_visible_elsewhere():
    f = mx.jit(lambda t: t * 2, donate_argnums=0)
    b = mnp.ones((2, 3)) + 1
    view = b.T  # a NumPy view of b's buffer
    host = np.asarray(mnp.ones(3) + 1)
    c = mx.asarray(host)
    for x in (b, c):
        f(x)
    np.testing.assert_array_equal(np.asarray(view), np.full((3, 2), 2.))
    np.testing.assert_array_equal(host, np.full(3, 2.))


def test_delete_method():
    a = mnp.ones(2)
    a.delete()
    assert a.is_deleted()
    with pytest.raises(RuntimeError, match="deleted"):
        mnp.sum(a)
