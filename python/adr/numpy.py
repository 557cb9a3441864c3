# SPDX-License-Identifier: Apache-2.0
"""NumPy arrays whose data adr allocates (NEP 49 allocation handlers).

    import adr.numpy
    h = adr.numpy.allocator("cpu")          # or "cuda_host:0", pool=False ...
    with adr.numpy.use(h):
        a = np.zeros(1 << 20)               # data from adr_alloc on cpu:0
    np.core.multiarray.get_handler_name(a)  # 'adr:cpu:0:pool'

NumPy keeps the handler in a context variable, so use() is local to the
thread or asyncio task that calls it, and every array is freed by the
handler that made it, also after the block. docs/python.md has the rules.
"""
from . import _adr


def allocator(device="cpu", pool=True):
    """A 'mem_handler' capsule allocating on `device` (host-accessible only)
    through adr's caching pool, or the backend allocator when pool=False."""
    return _adr.numpy_allocator(device, pool)


class use:
    """Sets `handler` (a capsule from allocator(), or None for NumPy's
    default) as NumPy's allocation handler for the block:

        with adr.numpy.use(h): ...

    A plain class rather than contextlib.contextmanager: entering and
    leaving cost two C calls."""

    __slots__ = ("handler", "_previous")

    def __init__(self, handler):
        self.handler = handler

    def __enter__(self):
        self._previous = _adr.numpy_set_handler(self.handler)
        return self.handler

    def __exit__(self, *exc):
        _adr.numpy_set_handler(self._previous)
        return False


def trim():
    """Gives the blocks the calling thread's cache holds back to adr and
    returns their bytes. adr's handlers keep a few freed blocks per thread
    (at most 16 and 8 MiB, each up to 1 MiB) for the next array of the same
    size; adr's statistics count them as allocated until then."""
    return _adr.numpy_trim()


def current():
    """The handler NumPy uses now in this context (PyDataMem_GetHandler)."""
    return _adr.numpy_get_handler()


__all__ = ["allocator", "current", "trim", "use"]
