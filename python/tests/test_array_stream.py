# SPDX-License-Identifier: Apache-2.0
"""adr.ArrayStream and the Arrow PyCapsule stream protocol, checked against
a stream consumer and producer written in C (arrow_consumer.c, loaded with
ctypes.PyDLL), not only against adr's own importer."""
import ctypes
import errno
import gc
import os
import sys

import numpy as np
import pytest

import adr
from conftest import device_or_skip

LIB = os.environ.get("ADR_PY_TEST_ARROW_CONSUMER")


@pytest.fixture(scope="module")
def c():
    if not LIB:
        pytest.skip("ADR_PY_TEST_ARROW_CONSUMER is not set (run through meson test)")
    lib = ctypes.PyDLL(LIB)
    lib.adr_test_consume_stream.argtypes = [ctypes.py_object, ctypes.c_int, ctypes.c_char_p,
                                            ctypes.c_size_t]
    lib.adr_test_make_stream.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
    lib.adr_test_make_stream.restype = ctypes.py_object
    return lib


def consume(c, cap, device):
    out = ctypes.create_string_buffer(1024)
    rc = c.adr_test_consume_stream(cap, int(device), out, 1024)
    return rc, out.value.decode()


class Producer:
    """An object with only the stream dunder, around a capsule made elsewhere."""

    def __init__(self, cap, device=False):
        self.calls = 0

        def give(requested_schema=None, **kw):
            self.calls += 1
            return cap

        if device:
            self.__arrow_c_device_stream__ = give
        else:
            self.__arrow_c_stream__ = give


def int64_arrays(n=3):
    return [adr.Array.from_numpy(np.arange(10 * i, 10 * i + 3, dtype=np.int64))
            for i in range(n)]


def test_from_arrays_iterate_and_read_all():
    arrays = int64_arrays(3)
    s = adr.ArrayStream.from_arrays(arrays)
    assert s.format == "l" and s.device_type == 1
    first = next(s)
    assert first is arrays[0]
    rest = s.read_all()
    assert [a.to_numpy().tolist() for a in rest] == [[10, 11, 12], [20, 21, 22]]
    assert s.read_all() == [] and list(s) == []
    assert [len(a) for a in adr.ArrayStream.from_arrays(int64_arrays(4))] == [3, 3, 3, 3]


def test_from_arrays_schema_mismatch():
    a = adr.Array.from_numpy(np.arange(3, dtype=np.int64))
    b = adr.Array.from_numpy(np.arange(3, dtype=np.int32))
    with pytest.raises(ValueError, match=r"arrays\[1\] has schema 'i', the stream 'l'"):
        adr.ArrayStream.from_arrays([a, b])
    with pytest.raises(ValueError, match=r"arrays\[0\] has schema 'l', the stream 'i'"):
        adr.ArrayStream.from_arrays([a], schema=b)
    with pytest.raises(TypeError, match=r"arrays\[1\] is int"):
        adr.ArrayStream.from_arrays([a, 3])
    with pytest.raises(TypeError):
        adr.ArrayStream.from_arrays(5)


def test_from_arrays_device_type_mismatch():
    others = [d for d in adr.devices() if d.type != 1]
    if not others:
        pytest.skip("only CPU devices here")
    a = adr.Array.from_numpy(np.arange(3, dtype=np.int64))
    with pytest.raises(ValueError, match="device type"):
        adr.ArrayStream.from_arrays([a, a.to_device(others[0])])


def test_empty_stream(c):
    with pytest.raises(ValueError, match="schema="):
        adr.ArrayStream.from_arrays([])
    proto = adr.Array.from_numpy(np.arange(1, dtype=np.float64))
    s = adr.ArrayStream.from_arrays([], schema=proto)
    assert s.format == "g" and s.read_all() == []
    for device in (False, True):
        s = adr.ArrayStream.from_arrays([], schema=proto)
        cap = s.__arrow_c_device_stream__() if device else s.__arrow_c_stream__()
        assert consume(c, cap, device) == (0, f"format=g batches=0 rows=0 device=1 sum=0")
        # a C producer with no batches
        imported = adr.ArrayStream.from_arrow(Producer(c.adr_test_make_stream(device, 0, -1),
                                                       device))
        assert imported.format == "l" and imported.read_all() == []


@pytest.mark.parametrize("device", [False, True])
def test_export_to_a_c_consumer(c, device):
    arrays = int64_arrays(3)
    refs = [sys.getrefcount(a) for a in arrays]
    s = adr.ArrayStream.from_arrays(arrays)
    cap = s.__arrow_c_device_stream__() if device else s.__arrow_c_stream__()
    assert repr(s).endswith("(exported)>")
    rc, text = consume(c, cap, device)
    assert rc == 0, text
    assert text == "format=l batches=3 rows=9 device=1 sum=99"
    with pytest.raises(ValueError, match="read once"):
        s.read_all()
    with pytest.raises(ValueError, match="read once"):
        s.__arrow_c_stream__()
    del cap, s
    gc.collect()
    assert [sys.getrefcount(a) for a in arrays] == refs  # every export released


@pytest.mark.parametrize("device", [False, True])
def test_import_from_a_c_producer(c, device):
    p = Producer(c.adr_test_make_stream(device, 3, -1), device)
    s = adr.ArrayStream.from_arrow(p)
    assert s.format == "l" and s.device_type == 1
    got = [a.to_numpy().tolist() for a in s]
    assert got == [[0, 1, 2], [10, 11, 12], [20, 21, 22]]
    assert all(a.device is adr.Device("cpu") for a in
               adr.ArrayStream.from_arrow(Producer(c.adr_test_make_stream(device, 2, -1),
                                                   device)))


def test_import_prefers_the_device_stream(c):
    class Both:
        def __arrow_c_device_stream__(self, requested_schema=None, **kw):
            return c.adr_test_make_stream(1, 1, -1)

        def __arrow_c_stream__(self, requested_schema=None):
            raise AssertionError("the device stream should be preferred")

    assert len(adr.ArrayStream.from_arrow(Both()).read_all()) == 1


@pytest.mark.parametrize("device", [False, True])
def test_producer_failing_mid_stream(c, device):
    s = adr.ArrayStream.from_arrow(Producer(c.adr_test_make_stream(device, 5, 2), device))
    assert len(next(s)) == 3 and len(next(s)) == 3
    with pytest.raises(adr.Error) as e:
        next(s)
    assert isinstance(e.value, OSError) and e.value.errno == errno.EIO
    assert "producer failed at batch 2" in e.value.strerror
    assert list(s) == []  # a failed stream is over
    # read_all raises the same way
    s = adr.ArrayStream.from_arrow(Producer(c.adr_test_make_stream(device, 5, 1), device))
    with pytest.raises(OSError, match="producer failed at batch 1"):
        s.read_all()
    # the error travels on through adr's own export to a C consumer
    s = adr.ArrayStream.from_arrow(Producer(c.adr_test_make_stream(device, 5, 3), device))
    cap = s.__arrow_c_device_stream__() if device else s.__arrow_c_stream__()
    rc, text = consume(c, cap, device)
    assert rc == 1 and text.startswith("error 5: ") and "producer failed at batch 3" in text


@pytest.mark.parametrize("device", [False, True])
def test_capsule_consumed_twice(c, device):
    p = Producer(c.adr_test_make_stream(device, 2, -1), device)
    adr.ArrayStream.from_arrow(p)
    with pytest.raises(ValueError, match="already consumed"):
        adr.ArrayStream.from_arrow(p)
    # adr's own capsule, consumed by C, then by adr
    s = adr.ArrayStream.from_arrays(int64_arrays(2))
    cap = s.__arrow_c_device_stream__() if device else s.__arrow_c_stream__()
    assert consume(c, cap, device)[0] == 0
    assert consume(c, cap, device) == (-1, "released stream in the capsule")
    with pytest.raises(ValueError, match="already consumed"):
        adr.ArrayStream.from_arrow(Producer(cap, device))


def test_bad_producers():
    with pytest.raises(TypeError, match="neither"):
        adr.ArrayStream.from_arrow(3)
    with pytest.raises(TypeError, match="capsule"):
        adr.ArrayStream.from_arrow(Producer(5, True))
    a = adr.Array.from_numpy(np.arange(3, dtype=np.int64))
    _, arr_cap = a.__arrow_c_array__()
    with pytest.raises(ValueError):  # a capsule of another name
        adr.ArrayStream.from_arrow(Producer(arr_cap, False))
    s = adr.ArrayStream.from_arrays([a])
    with pytest.raises(NotImplementedError, match="keyword"):
        s.__arrow_c_device_stream__(future_option=True)
    s.__arrow_c_device_stream__(None, future_option=None)  # None is allowed


def test_unconsumed_capsule_releases_in_its_destructor():
    arrays = int64_arrays(2)
    refs = [sys.getrefcount(a) for a in arrays]
    s = adr.ArrayStream.from_arrays(arrays)
    srefs = sys.getrefcount(s)
    cap = s.__arrow_c_device_stream__()
    assert sys.getrefcount(s) == srefs + 1
    del cap
    gc.collect()
    assert sys.getrefcount(s) == srefs
    del s
    gc.collect()
    assert [sys.getrefcount(a) for a in arrays] == refs


def test_round_trip_through_adr():
    arrays = int64_arrays(3)
    s = adr.ArrayStream.from_arrow(adr.ArrayStream.from_arrays(arrays))
    back = s.read_all()
    assert len(back) == 3 and all(b.equals(a) for a, b in zip(arrays, back))
    schema = adr.ArrayStream.from_arrays(arrays).__arrow_c_schema__()
    assert type(schema).__name__ == "PyCapsule"


def test_cpu_stream_refuses_device_arrays():
    others = [d for d in adr.devices() if d.type != 1]
    if not others:
        pytest.skip("only CPU devices here")
    a = adr.Array.from_numpy(np.arange(3, dtype=np.int64)).to_device(others[0])
    with pytest.raises(BufferError, match="not the CPU"):
        adr.ArrayStream.from_arrays([a]).__arrow_c_stream__()


@pytest.mark.parametrize("name", ["cpu:0", "opencl:0", "vulkan:0"])
def test_device_streams(c, name):
    dev = device_or_skip(name)
    host = [adr.Array.from_numpy(np.arange(100 * i, 100 * i + 50, dtype=np.int64))
            for i in range(3)]
    arrays = [h.to_device(dev) for h in host]
    s = adr.ArrayStream.from_arrays(arrays)
    assert s.device_type == dev.type
    rc, text = consume(c, s.__arrow_c_device_stream__(), True)
    assert rc == 0, text
    assert f"batches=3 rows=150 device={dev.type}" in text
    if dev.kind == "cpu":
        assert text.endswith(f"sum={sum(int(h.to_numpy().sum()) for h in host)}")
    # adr's importer on adr's device stream: same device, same values
    back = adr.ArrayStream.from_arrow(adr.ArrayStream.from_arrays(arrays)).read_all()
    assert [b.device for b in back] == [dev] * 3
    assert all(b.to_host().equals(h) for b, h in zip(back, host))
