# SPDX-License-Identifier: Apache-2.0
"""adr.Array and the Arrow PyCapsule interface, checked against a consumer
and producer written in C (arrow_consumer.c, loaded with ctypes.PyDLL), not
only against adr's own importer. pyarrow is not installable here."""
import ctypes
import gc
import os
import sys

import numpy as np
import pytest

import adr

LIB = os.environ.get("ADR_PY_TEST_ARROW_CONSUMER")


@pytest.fixture(scope="module")
def c():
    if not LIB:
        pytest.skip("ADR_PY_TEST_ARROW_CONSUMER is not set (run through meson test)")
    lib = ctypes.PyDLL(LIB)
    lib.adr_test_consume.argtypes = [ctypes.py_object, ctypes.py_object, ctypes.c_int,
                                     ctypes.c_char_p, ctypes.c_size_t]
    lib.adr_test_consume_children.argtypes = [ctypes.py_object, ctypes.py_object,
                                              ctypes.c_char_p, ctypes.c_size_t]
    lib.adr_test_make_struct.argtypes = [ctypes.c_int]
    lib.adr_test_make_struct.restype = ctypes.py_object
    return lib


def consume(c, pair, device):
    out = ctypes.create_string_buffer(512)
    rc = c.adr_test_consume(pair[0], pair[1], int(device), out, 512)
    return rc, out.value.decode()


class Producer:
    """An object with only the dunders, around capsules made elsewhere."""

    def __init__(self, pair, device=False):
        self.pair = pair
        if device:
            self.__arrow_c_device_array__ = lambda requested_schema=None, **kw: pair
        else:
            self.__arrow_c_array__ = lambda requested_schema=None: pair


def test_cpu_capsules_to_a_c_consumer(c):
    a = adr.Array.from_numpy(np.arange(10, dtype=np.int64))
    refs = sys.getrefcount(a)
    rc, text = consume(c, a.__arrow_c_array__(), False)
    assert rc == 0, text
    assert text == ("format=l length=10 null_count=0 n_buffers=2 n_children=0 device=1:-1 "
                    "sync=no sum=45")
    gc.collect()
    assert sys.getrefcount(a) == refs  # the consumer's release dropped the export


def test_unconsumed_capsules_release_in_their_destructor():
    a = adr.Array.from_numpy(np.arange(4, dtype=np.int32))
    refs = sys.getrefcount(a)
    pair = a.__arrow_c_array__()
    dpair = a.__arrow_c_device_array__()
    assert sys.getrefcount(a) == refs + 2
    del pair, dpair
    gc.collect()
    assert sys.getrefcount(a) == refs


def test_device_capsules_every_device(c, device):
    host = adr.Array.from_numpy(np.arange(100, dtype=np.int64))
    a = host.to_device(device)
    assert a.device is device and len(a) == 100
    rc, text = consume(c, a.__arrow_c_device_array__(), True)
    assert rc == 0, text
    cpu_id = -1 if device.kind == "cpu" else device.id
    assert f"device={device.type}:{cpu_id}" in text and "length=100" in text
    if device.kind == "cpu":
        assert "sum=4950" in text
        assert consume(c, a.__arrow_c_array__(), False)[1].endswith("sum=4950")
    else:
        with pytest.raises(BufferError, match="not the CPU"):
            a.__arrow_c_array__()


def test_round_trip_through_every_device(device):
    values = np.arange(1000, dtype=np.float64) / 7
    a = adr.Array.from_numpy(values)
    d = a.to_device(device)
    d.validate()
    back = adr.Array.from_arrow(d)  # adr consuming adr's device capsules
    assert back.device is device and back.equals(a)
    assert np.array_equal(back.to_host().to_numpy(), values)


def test_c_producer_struct_and_children(c):
    arr = adr.Array.from_arrow(Producer(c.adr_test_make_struct(0)))
    assert arr.format == "+s" and len(arr) == 3 and arr.device is adr.Device("cpu")
    arr.validate(full=True)
    # re-export to C: the child can be moved out and outlive its parent
    out = ctypes.create_string_buffer(256)
    refs = sys.getrefcount(arr)
    s, a = arr.__arrow_c_array__()
    assert c.adr_test_consume_children(s, a, out, 256) == 0
    assert out.value.decode() == "child0 format=l length=3 sum=33"
    del s, a
    gc.collect()
    assert sys.getrefcount(arr) == refs
    for d in adr.devices():
        assert arr.to_device(d).to_host().equals(arr)


def test_validate_names_the_bad_child(c):
    arr = adr.Array.from_arrow(Producer(c.adr_test_make_struct(1)))
    with pytest.raises(adr.Error) as e:
        arr.validate()
    assert "children[1]" in e.value.strerror
    assert e.value.strerror.startswith("[adr_device_array_validate]")
    with pytest.raises(adr.Error):
        arr.validate(full=False)


def test_capsules_consumed_twice(c):
    pair = c.adr_test_make_struct(0)
    adr.Array.from_arrow(Producer(pair))
    with pytest.raises(ValueError, match="released struct"):
        adr.Array.from_arrow(Producer(pair))
    a = adr.Array.from_numpy(np.arange(3, dtype=np.int64))
    pair = a.__arrow_c_device_array__()
    assert consume(c, pair, True)[0] == 0
    with pytest.raises(ValueError, match="released struct"):
        adr.Array.from_arrow(Producer(pair, device=True))


def test_bad_producers():
    with pytest.raises(TypeError, match="neither"):
        adr.Array.from_arrow(3)
    with pytest.raises(TypeError, match="did not return a pair"):
        adr.Array.from_arrow(Producer(None))
    a = adr.Array.from_numpy(np.arange(3, dtype=np.int64))
    s, arr = a.__arrow_c_array__()
    with pytest.raises(ValueError):  # capsule names swapped
        adr.Array.from_arrow(Producer((arr, s)))
    with pytest.raises(TypeError, match="capsule"):
        adr.Array.from_arrow(Producer((1, 2)))
    with pytest.raises(NotImplementedError, match="keyword"):
        a.__arrow_c_device_array__(future_option=True)
    a.__arrow_c_device_array__(future_option=None)  # None is allowed


def test_from_numpy_and_to_numpy():
    for dt in ("i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f2", "f4", "f8"):
        v = np.arange(17).astype(dt)
        a = adr.Array.from_numpy(v)
        n = a.to_numpy()
        assert n.dtype == np.dtype(dt) and np.array_equal(n, v) and not n.flags.writeable
    with pytest.raises(TypeError, match="1-D"):
        adr.Array.from_numpy(np.ones((2, 2)))
    with pytest.raises(TypeError, match="1-D"):
        adr.Array.from_numpy(np.array([True]))
    with pytest.raises(TypeError, match="1-D"):
        adr.Array.from_numpy(np.arange(3, dtype=">i4"))
    with pytest.raises((BufferError, ValueError), match="contiguous"):
        adr.Array.from_numpy(np.arange(10)[::2])
    n = adr.Array.from_numpy(np.arange(5, dtype=np.int64)).to_numpy()
    gc.collect()
    assert n.tolist() == [0, 1, 2, 3, 4]  # the view keeps the array alive


def test_to_numpy_needs_host_memory():
    others = [d for d in adr.devices() if not d.host_accessible]
    if not others:
        pytest.skip("every device here is host-accessible")
    a = adr.Array.from_numpy(np.arange(3, dtype=np.int64)).to_device(others[0])
    with pytest.raises(ValueError, match="to_host"):
        a.to_numpy()
