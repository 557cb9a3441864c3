# SPDX-License-Identifier: Apache-2.0
"""adr.numpy: NumPy allocation handlers backed by adr (NEP 49, shared/seeds/003)."""
import asyncio
import gc
import os
import threading

import numpy as np
import pytest

import adr
import adr.numpy
from conftest import ALL

get_name = np.core.multiarray.get_handler_name
HOST = [n for n in ALL if adr.Device(n).host_accessible]


def allocated(dev):
    """adr's count of live allocations on dev, after the garbage collector
    ran and this thread's handler cache went back to adr (trim())."""
    gc.collect()
    adr.numpy.trim()
    return dev.memory_info()["allocated_count"]["current"]


@pytest.fixture(params=HOST)
def host_device(request):
    return adr.Device(request.param)


@pytest.mark.parametrize("pool", [True, False])
def test_arrays_come_from_adr(host_device, pool):
    h = adr.numpy.allocator(host_device, pool=pool)
    name = f"adr:{host_device.name}:{'pool' if pool else 'backend'}"
    before = allocated(host_device)
    with adr.numpy.use(h):
        a = np.arange(100_000, dtype=np.float64)
        z = np.zeros((300, 300))
        e = np.empty(0)
        assert get_name(a) == get_name(z) == get_name(e) == name
        assert get_name() == name
        assert allocated(host_device) == before + 3
    assert get_name(np.arange(3)) == "default_allocator"
    assert get_name() == "default_allocator"
    assert a.ctypes.data % 64 == 0 and z.ctypes.data % 64 == 0
    assert a[-1] == 99_999 and not z.any()
    del a, z, e
    assert allocated(host_device) == before


def test_calloc_zeroes_reused_memory(cpu):
    h = adr.numpy.allocator(cpu)
    with adr.numpy.use(h):
        for _ in range(20):
            junk = np.full(1 << 16, 0xAB, dtype=np.uint8)
            del junk
            z = np.zeros(1 << 16, dtype=np.uint8)  # the pool hands back the junk block
            assert not z.any()


def test_resize_keeps_contents(cpu):
    h = adr.numpy.allocator(cpu)
    with adr.numpy.use(h):
        a = np.arange(1000, dtype=np.int64)
        a.resize(5000, refcheck=False)  # realloc, grown
        assert (a[:1000] == np.arange(1000)).all() and not a[1000:].any()
        a.resize(10, refcheck=False)  # shrunk
        assert a.tolist() == list(range(10))
    a.resize(20_000, refcheck=False)  # after the block: still adr's handler (NEP 49)
    assert a[9] == 9 and get_name(a).startswith("adr:")


def test_views_outlive_block_and_handler(cpu):
    before = allocated(cpu)
    h = adr.numpy.allocator(cpu)
    with adr.numpy.use(h):
        base = np.arange(1 << 20, dtype=np.int32)
    v = base[::1024]
    del base, h
    gc.collect()
    assert v.sum() == sum(range(0, 1 << 20, 1024))
    assert allocated(cpu) == before + 1
    del v
    assert allocated(cpu) == before


def test_many_arrays(cpu):
    before = allocated(cpu)
    rng = np.random.default_rng(0)
    with adr.numpy.use(adr.numpy.allocator(cpu)):
        keep = []
        for i in range(3000):
            a = np.ones(int(rng.integers(0, 50_000)), dtype=np.uint8)
            if i % 3 == 0:
                keep.append(a)
            if i % 7 == 0 and keep:
                keep.pop(0).resize(int(rng.integers(0, 100_000)), refcheck=False)
        assert all(k.all() for k in keep)
    del keep, a
    assert allocated(cpu) == before


def test_threads_and_tasks_are_isolated(cpu):
    h = adr.numpy.allocator(cpu)
    seen = {}

    def worker(name, use):
        if use:
            with adr.numpy.use(h):
                seen[name] = get_name(np.ones(10))
        else:
            seen[name] = get_name(np.ones(10))

    with adr.numpy.use(h):
        t = threading.Thread(target=worker, args=("other", False))
        t.start()
        t.join()
        seen["main"] = get_name(np.ones(10))
    ts = [threading.Thread(target=worker, args=(f"t{i}", True)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert seen["other"] == "default_allocator"  # a new thread starts with the default
    assert seen["main"] == "adr:cpu:0:pool"
    assert all(seen[f"t{i}"] == "adr:cpu:0:pool" for i in range(4))

    async def task(use):
        if use:
            with adr.numpy.use(h):
                await asyncio.sleep(0.01)
                return get_name(np.ones(3))
        await asyncio.sleep(0.005)
        return get_name(np.ones(3))

    async def main():
        return await asyncio.gather(task(True), task(False))

    assert asyncio.run(main()) == ["adr:cpu:0:pool", "default_allocator"]


def test_current_and_nesting(cpu):
    h1 = adr.numpy.allocator(cpu)
    h2 = adr.numpy.allocator(cpu, pool=False)
    with adr.numpy.use(h1):
        assert adr.numpy.current() is h1
        with adr.numpy.use(h2):
            assert get_name(np.ones(2)) == "adr:cpu:0:backend"
        assert get_name(np.ones(2)) == "adr:cpu:0:pool"
        with adr.numpy.use(None):
            assert get_name(np.ones(2)) == "default_allocator"
    assert get_name(np.ones(2)) == "default_allocator"


def test_errors():
    for d in adr.devices():
        if not d.host_accessible:
            with pytest.raises(ValueError, match="not host-accessible"):
                adr.numpy.allocator(d)
    with pytest.raises(ValueError, match="unknown device kind"):
        adr.numpy.allocator("gpu")
    with pytest.raises(adr.Error):
        adr.numpy.allocator("cpu:5")
    with pytest.raises(TypeError, match="mem_handler"):
        with adr.numpy.use(42):
            pass
    import datetime
    with pytest.raises(TypeError, match="mem_handler"):
        with adr.numpy.use(datetime.datetime_CAPI):
            pass


def test_out_of_memory_is_memory_error(cpu):
    with adr.numpy.use(adr.numpy.allocator(cpu)):
        with pytest.raises(MemoryError):
            np.empty(1 << 60, dtype=np.uint8)


def test_thread_cache_reuses_blocks(cpu):
    h = adr.numpy.allocator(cpu)
    before = allocated(cpu)
    with adr.numpy.use(h):
        a = np.empty(1000, np.uint8)
        a.fill(7)
        addr = a.ctypes.data
        del a  # cached by this thread, still allocated in adr's count
        assert cpu.memory_info()["allocated_count"]["current"] == before + 1
        b = np.zeros(1000, np.uint8)  # the same rounded size: the same block, zeroed
        assert b.ctypes.data == addr and not b.any()
        c = np.ones(5000, np.uint8)  # another size: a new block from adr
        assert c.ctypes.data != addr
        del b, c
    assert adr.numpy.trim() >= 1000 + 5000
    assert adr.numpy.trim() == 0
    assert allocated(cpu) == before


def test_thread_cache_is_bounded_and_per_device(cpu):
    h = adr.numpy.allocator(cpu)
    before = allocated(cpu)
    with adr.numpy.use(h):
        arrays = [np.ones(1 << 16, np.uint8) for _ in range(40)]
        del arrays
        # at most 16 blocks stay cached
        assert cpu.memory_info()["allocated_count"]["current"] <= before + 16
        big = np.ones(4 << 20, np.uint8)  # above the cached size: straight back to adr
        del big
    others = [n for n in HOST if n != "cpu:0"]
    if others:
        other = adr.Device(others[0])
        o_before = allocated(other)
        with adr.numpy.use(adr.numpy.allocator(other)):
            x = np.empty(1 << 16, np.uint8)  # not a cpu block from the cache
            assert other.memory_info()["allocated_count"]["current"] == o_before + 1
            del x
        assert allocated(other) == o_before
    assert allocated(cpu) == before


def test_thread_exit_returns_cached_blocks(cpu):
    h = adr.numpy.allocator(cpu)
    before = allocated(cpu)

    def worker():
        with adr.numpy.use(h):
            for _ in range(10):
                np.ones(3000, np.uint8)

    ts = [threading.Thread(target=worker) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    gc.collect()
    assert cpu.memory_info()["allocated_count"]["current"] == before


def test_realloc_within_the_rounded_size_keeps_the_block(cpu):
    with adr.numpy.use(adr.numpy.allocator(cpu)):
        a = np.arange(100, dtype=np.uint8)
        addr = a.ctypes.data
        a.resize(110, refcheck=False)  # 100 and 110 round to the same block
        assert a.ctypes.data == addr and a[:100].tolist() == list(range(100))


def test_thread_cache_finds_an_older_block(cpu):
    # The newest cached block is tried first; an older one of the asked size
    # is still found, and the newest stays for its own size.
    with adr.numpy.use(adr.numpy.allocator(cpu)):
        a = np.empty(3000, np.uint8)
        b = np.empty(7000, np.uint8)
        addr_a, addr_b = a.ctypes.data, b.ctypes.data
        del a, b  # cached: a, then b (the newest)
        c = np.empty(3000, np.uint8)
        d = np.empty(7000, np.uint8)
        assert (c.ctypes.data, d.ctypes.data) == (addr_a, addr_b)
        del c, d
    adr.numpy.trim()


def _vm_flags(addr):
    """The VmFlags of the mapping of /proc/self/smaps holding addr."""
    inside = False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split(None, 1)[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(x, 16) for x in head.split("-"))
                inside = lo <= addr < hi
            elif inside and head == "VmFlags:":
                return line.split()[1:]
    return None


@pytest.mark.skipif(
    not os.path.exists("/sys/kernel/mm/transparent_hugepage/enabled"),
    reason="no transparent huge pages in this kernel",
)
@pytest.mark.parametrize("pool", [True, False])
def test_large_cpu_blocks_are_advised_huge_pages(cpu, pool):
    # Like NumPy's default handler for its own arrays of 4 MiB or more: the
    # block's 2 MiB-aligned part is advised MADV_HUGEPAGE before NumPy
    # touches it (VmFlags "hg"), whatever the kernel then makes of it.
    with adr.numpy.use(adr.numpy.allocator(cpu, pool=pool)):
        a = np.ones(16 << 20, np.uint8)
    mid = a.ctypes.data + (8 << 20)
    assert "hg" in _vm_flags(mid)
    assert a[0] == a[-1] == 1 and a.sum() == 16 << 20
