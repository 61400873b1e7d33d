"""launch.Kernel's argument blocks, without a GPU: launch.py is loaded with a stand-in for
the few CuPy names it uses, whose driver records each launch's kernel, grid, block, shared
memory, stream and the argument values read back from the block it was given."""
from __future__ import annotations

import ctypes
import importlib.util
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import mirax.backends

LAUNCH = Path(mirax.backends.__file__).parent / "cuda" / "launch.py"
READ = {np.uint64: ctypes.c_uint64, np.int64: ctypes.c_int64, np.int32: ctypes.c_int32,
        np.float32: ctypes.c_float}


@pytest.fixture
def launch(monkeypatch):
    launches = []
    cp = types.ModuleType("cupy")
    cuda = types.ModuleType("cupy.cuda")
    cp.cuda = cuda
    cuda.get_current_stream = lambda: types.SimpleNamespace(ptr=77)
    cuda.runtime = types.SimpleNamespace(getDevice=lambda: 0)
    cuda.driver = types.SimpleNamespace()
    for name, mod in (("cupy", cp), ("cupy.cuda", cuda)):
        monkeypatch.setitem(sys.modules, name, mod)
    spec = importlib.util.spec_from_file_location("mirax_launch_under_test", LAUNCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)

    def launch_kernel(f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        kinds = mod._test_kinds  # the C types of this launch's arguments, in order
        ptrs = (ctypes.c_void_p * len(kinds)).from_address(params)
        values = [READ[k].from_address(p).value for k, p in zip(kinds, ptrs)]
        launches.append((f, (gx, gy, gz), (bx, by, bz), smem, stream, extra, values))
    mod.driver.launchKernel = launch_kernel
    mod._test_launches = launches
    return mod


class _Fn:
    def __init__(self):
        self.kernel = types.SimpleNamespace(ptr=1234)
        self.max_dynamic_shared_size_bytes = None


def _call(launch, k, grid, block, args, smem=0):
    launch._test_kinds = [type(a) for a in args]
    k(grid, block, args, shared_mem=smem)
    return launch._test_launches[-1]


def test_each_call_launches_its_own_addresses_with_the_signature_s_values(launch):
    k = launch.Kernel(_Fn())
    args = lambda p, n: (np.uint64(p), np.int64(-3), np.uint64(p + 8), np.int32(n),
                         np.float32(0.125))
    first = _call(launch, k, (4, 2), (128,), args(1000, 7), smem=512)
    assert first == (1234, (4, 2, 1), (128, 1, 1), 512, 77, 0, [1000, -3, 1008, 7, 0.125])
    second = _call(launch, k, (4, 2), (128,), args(5000, 7), smem=512)
    assert second[-1] == [5000, -3, 5008, 7, 0.125]
    assert len(k.blocks) == 1            # the same signature: one block, rewritten
    third = _call(launch, k, (4, 2), (128,), args(9000, 9), smem=512)
    assert third[-1] == [9000, -3, 9008, 9, 0.125]
    assert len(k.blocks) == 2            # another value of a non-address argument
    again = _call(launch, k, (4, 2), (128,), args(64, 7), smem=512)
    assert again[-1] == [64, -3, 72, 7, 0.125]
    other_grid = _call(launch, k, (8, 2), (128,), args(64, 7), smem=512)
    assert other_grid[1] == (8, 2, 1) and len(k.blocks) == 3


def test_blocks_are_bounded_and_the_oldest_goes_first(launch, monkeypatch):
    monkeypatch.setattr(launch.Kernel, "MAX_BLOCKS", 3)
    k = launch.Kernel(_Fn())
    for n in range(5):
        got = _call(launch, k, (1,), (32,), (np.uint64(100 + n), np.int32(n)))
        assert got[-1] == [100 + n, n]
    assert len(k.blocks) == 3
    assert [key[-1] for key in k.blocks] == [np.int32(2), np.int32(3), np.int32(4)]


def test_shared_memory_over_the_default_is_opted_into_once(launch):
    small, big = _Fn(), _Fn()
    launch.Kernel(small, 48 * 1024)
    launch.Kernel(big, 100 * 1024)
    assert small.max_dynamic_shared_size_bytes is None
    assert big.max_dynamic_shared_size_bytes == 100 * 1024


def test_kernel_is_made_once_a_module_name_and_device(launch):
    made = []

    class Mod:
        def get_function(self, name):
            made.append(name)
            return _Fn()
    mod = Mod()
    assert launch.kernel(mod, "f", 0) is launch.kernel(mod, "f", 0)
    assert launch.kernel(mod, "g") is not launch.kernel(mod, "f")
    assert made == ["f", "g"]
