# SPDX-License-Identifier: Apache-2.0
import gc
import threading
import weakref

import numpy as np
import pytest

import adr


def test_alloc_copy_roundtrip(device, cpu):
    data = bytes(range(256)) * 4
    b = device.alloc(len(data))
    assert b.nbytes == len(b) == len(data)
    assert b.device is device
    assert b.owned and not b.freed
    assert b.ptr != 0 and b.ptr % 64 == 0
    b.copy_from(data)
    assert b.to_bytes() == data
    h = b.copy_to(cpu)
    assert h.device is cpu and h.to_bytes() == data
    back = h.copy_to(device.name)
    assert back.to_bytes() == data
    c = device.alloc(len(data))
    c.copy_from(back)  # Buffer to Buffer on one device
    assert c.to_bytes() == data


def test_copy_from_offsets_and_types(device):
    b = device.alloc(16)
    b.fill(0)
    b.copy_from(np.array([1, 2], dtype=np.uint32), offset=4)
    b.copy_from(bytearray(b"\xff"), offset=15)
    b.copy_from(memoryview(b"ab"), offset=0)
    assert b.to_bytes() == b"ab\0\0\1\0\0\0\2\0\0\0\0\0\0\xff"
    with pytest.raises(ValueError, match="do not fit"):
        b.copy_from(b"x" * 17)
    with pytest.raises(ValueError, match="do not fit"):
        b.copy_from(b"xy", offset=15)
    with pytest.raises(ValueError, match="do not fit"):
        b.copy_from(b"x", offset=-1)
    with pytest.raises(TypeError):
        b.copy_from(12)
    with pytest.raises(ValueError):
        b.fill(256)
    b.copy_from(b"")  # nothing to do


def test_non_contiguous_source_is_refused(cpu):
    b = cpu.alloc(64)
    with pytest.raises((BufferError, ValueError), match="contiguous"):
        b.copy_from(np.arange(16, dtype=np.uint8)[::2])


def test_cross_device_copies():
    devs = adr.devices()
    if len(devs) < 2:
        pytest.skip(f"needs two devices, have {[d.name for d in devs]}")
    data = np.random.default_rng(1).integers(0, 255, 4096, dtype=np.uint8).tobytes()
    for src in devs:
        a = src.alloc(len(data))
        a.copy_from(data)
        for dst in devs:
            assert a.copy_to(dst).to_bytes() == data, (src, dst)


def test_zero_size(device):
    b = device.alloc(0)
    assert len(b) == 0 and b.to_bytes() == b""
    assert b.copy_to("cpu").to_bytes() == b""
    b.free()


def test_free_and_use_after_free(device):
    gc.collect()
    before = device.memory_info()["allocated_bytes"]["current"]
    b = device.alloc(4096)
    assert device.memory_info()["allocated_bytes"]["current"] == before + 4096
    b.free()
    assert b.freed
    assert device.memory_info()["allocated_bytes"]["current"] == before
    for op in (lambda: b.ptr, lambda: len(b), b.to_bytes, lambda: b.copy_from(b"x"),
               lambda: b.copy_to("cpu"), b.free, lambda: b.fill(1), b.__dlpack__,
               b.__dlpack_device__):
        with pytest.raises(ValueError, match="buffer was freed"):
            op()
    with pytest.raises(BufferError, match="freed"):
        memoryview(b)
    assert "freed" in repr(b)
    c = device.alloc(8)
    with pytest.raises(ValueError, match="buffer was freed"):
        c.copy_from(b)


def test_freed_by_refcount(device):
    gc.collect()
    before = device.memory_info()["allocated_count"]["current"]
    bufs = [device.alloc(100) for _ in range(20)]
    assert device.memory_info()["allocated_count"]["current"] == before + 20
    r = weakref.ref(bufs[0])
    del bufs
    gc.collect()
    assert r() is None
    assert device.memory_info()["allocated_count"]["current"] == before


def test_context_manager_frees(device):
    with device.alloc(64) as b:
        b.fill(7)
    assert b.freed


def test_buffer_keeps_its_device(device):
    b = device.alloc(8)
    assert b.device is adr.Device(device.name)


def test_bad_sizes(device):
    with pytest.raises(ValueError, match="negative size"):
        device.alloc(-1)
    with pytest.raises(ValueError, match="negative alignment"):
        device.alloc(8, alignment=-64)
    with pytest.raises(adr.Error) as e:
        device.alloc(8, alignment=48)  # not a power of two
    assert e.value.strerror.startswith("[adr_alloc]")
    with pytest.raises((adr.Error, OverflowError)) as e:
        device.alloc(2**62)
    if isinstance(e.value, adr.Error):
        assert e.value.strerror.startswith("[adr_alloc]")
    with pytest.raises(TypeError):
        device.alloc("8")


def test_buffer_protocol_host_memory(cpu):
    b = cpu.alloc(8)
    m = memoryview(b)
    assert m.nbytes == 8 and not m.readonly and m.format == "B"
    m[:] = b"ABCDEFGH"
    assert b.to_bytes() == b"ABCDEFGH"
    a = np.frombuffer(b, dtype=np.uint8)
    assert a.tobytes() == b"ABCDEFGH"
    with pytest.raises(BufferError, match="export"):
        b.free()
    m.release()
    del a
    gc.collect()
    b.free()


def test_buffer_protocol_follows_host_accessible(device):
    b = device.alloc(8)
    if device.host_accessible:
        assert memoryview(b).nbytes == 8
    else:
        with pytest.raises(BufferError, match="not host-accessible"):
            memoryview(b)


def test_threads_share_buffers(device):
    data = bytes(range(256)) * 64
    b = device.alloc(len(data))
    b.copy_from(data)
    errors = []

    def work():
        try:
            for _ in range(20):
                c = b.copy_to("cpu")
                assert c.to_bytes() == data
                d = device.alloc(4096)
                d.copy_from(c, offset=0) if len(c) <= 4096 else d.copy_from(data[:4096])
                d.free()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
