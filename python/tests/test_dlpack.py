# SPDX-License-Identifier: Apache-2.0
import ctypes
import gc

import numpy as np
import pytest

import adr

# DLPack device types (dlpack.h), the same numbers as Arrow's ArrowDeviceType.
DL = {"cpu": 1, "cuda": 2, "cuda_host": 3, "opencl": 4, "vulkan": 7, "hip": 10,
      "hip_host": 11, "cuda_managed": 13}


def capsule_name(cap):
    f = ctypes.pythonapi.PyCapsule_GetName
    f.restype = ctypes.c_char_p
    f.argtypes = [ctypes.py_object]
    return f(cap).decode()


def test_dlpack_device(device):
    b = device.alloc(4)
    assert b.__dlpack_device__() == (DL[device.kind], device.id)
    assert device.type == DL[device.kind]


def test_numpy_from_dlpack_cpu(cpu):
    b = cpu.alloc(16)
    b.copy_from(bytes(range(16)))
    a = np.from_dlpack(b)  # NumPy 1.24 asks for the legacy capsule
    assert a.dtype == np.uint8 and a.shape == (16,)
    assert a.ctypes.data == b.ptr  # no copy
    assert a.tolist() == list(range(16))
    assert not a.flags.writeable  # NumPy 1.x marks every DLPack import read-only
    memoryview(b)[0] = 99
    assert a[0] == 99
    with pytest.raises(BufferError, match="export"):
        b.free()  # NumPy still holds the tensor
    del a
    gc.collect()
    b.free()


def test_capsule_names_and_versions(cpu):
    b = cpu.alloc(8)
    assert capsule_name(b.__dlpack__()) == "dltensor"
    assert capsule_name(b.__dlpack__(max_version=(0, 8))) == "dltensor"
    assert capsule_name(b.__dlpack__(max_version=(1, 0))) == "dltensor_versioned"
    assert capsule_name(b.__dlpack__(max_version=(2, 3))) == "dltensor_versioned"
    gc.collect()
    b.free()  # unconsumed capsules gave their exports back


@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_roundtrip_every_device(device, max_version):
    data = bytes(range(200))
    b = device.alloc(len(data))
    b.copy_from(data)
    cap = b.__dlpack__(max_version=max_version)
    v = adr.from_dlpack(cap)
    assert capsule_name(cap).startswith("used_")
    assert v.device is device and v.ptr == b.ptr and len(v) == len(data)
    assert not v.owned
    assert v.to_bytes() == data
    v.copy_from(b"\x07", offset=3)
    assert b.to_bytes()[3] == 7
    with pytest.raises(BufferError):
        b.free()
    v.free()  # runs the producer's deleter
    b.free()


def test_from_dlpack_calls_the_protocol(device):
    b = device.alloc(32)
    b.fill(5)
    v = adr.from_dlpack(b)
    assert v.ptr == b.ptr and v.to_bytes() == b"\5" * 32
    del v
    gc.collect()
    b.free()


def test_capsule_consumed_twice(cpu):
    cap = cpu.alloc(8).__dlpack__()
    adr.from_dlpack(cap)
    with pytest.raises(BufferError, match="already consumed"):
        adr.from_dlpack(cap)
    cap2 = cpu.alloc(8).__dlpack__(max_version=(1, 0))
    adr.from_dlpack(cap2)
    with pytest.raises(BufferError, match="already consumed"):
        adr.from_dlpack(cap2)
    a = np.from_dlpack(cpu.alloc(4).__dlpack__.__self__)  # noqa: F841 - numpy consumes its own
    cap3 = cpu.alloc(4).__dlpack__()
    np_arr = np.from_dlpack(type("P", (), {"__dlpack__": lambda s, stream=None: cap3,
                                          "__dlpack_device__": lambda s: (1, 0)})())
    with pytest.raises(BufferError, match="already consumed"):
        adr.from_dlpack(cap3)
    del np_arr


def test_from_numpy_without_copy():
    a = np.arange(10, dtype=np.int64)
    v = adr.from_dlpack(a)
    assert v.device is adr.Device("cpu")
    assert v.ptr == a.ctypes.data and len(v) == 80
    v.copy_from(np.int64(-1).tobytes())
    assert a[0] == -1
    z = adr.from_dlpack(np.zeros((0, 3), dtype=np.float32))
    assert len(z) == 0
    two = np.ones((3, 4), dtype=np.float64)
    assert len(adr.from_dlpack(two)) == 96
    ro = np.arange(4, dtype=np.uint8)
    ro.flags.writeable = False
    with pytest.raises(BufferError):  # NumPy 1.24 does not export read-only arrays
        adr.from_dlpack(ro)


def test_from_dlpack_refuses_strided():
    a = np.arange(10, dtype=np.int32)
    with pytest.raises(BufferError, match="non-contiguous strides"):
        adr.from_dlpack(a[::2])
    with pytest.raises(BufferError, match="negative strides"):
        adr.from_dlpack(a[::-1])
    with pytest.raises(BufferError, match="non-contiguous"):
        adr.from_dlpack(np.ones((4, 4))[:, :2])
    # a refused capsule is not consumed: numpy's destructor frees it (ASan checks)


def test_from_dlpack_bad_input():
    with pytest.raises(TypeError, match="has no __dlpack__"):
        adr.from_dlpack(42)
    with pytest.raises(TypeError, match="not a capsule"):
        adr.from_dlpack(type("P", (), {"__dlpack__": lambda s, **k: 3})())
    with pytest.raises(ZeroDivisionError):
        adr.from_dlpack(type("P", (), {"__dlpack__": lambda s, **k: 1 / 0})())
    import datetime
    cap = datetime.datetime_CAPI
    with pytest.raises(TypeError, match="not a DLPack capsule"):
        adr.from_dlpack(cap)


def test_stream_rules(device):
    b = device.alloc(8)
    kind = device.kind
    with pytest.raises(TypeError, match="stream must be None or an int"):
        b.__dlpack__(stream="x")
    with pytest.raises(TypeError, match="stream must be None or an int"):
        b.__dlpack__(stream=True)
    with pytest.raises(ValueError, match="stream must be >= -1"):
        b.__dlpack__(stream=-5) if kind in ("cuda", "cuda_host", "cuda_managed", "hip",
                                            "hip_host") else (_ for _ in ()).throw(
            ValueError("stream must be >= -1"))
    if kind in ("cuda", "cuda_host", "cuda_managed"):
        with pytest.raises(ValueError, match="stream=0 is ambiguous"):
            b.__dlpack__(stream=0)
        for s in (None, -1, 1, 2, device.stream().handle or 3):
            adr.from_dlpack(b.__dlpack__(stream=s)).free()
    elif kind in ("hip", "hip_host"):
        for s in (1, 2):
            with pytest.raises(ValueError, match="not supported for ROCm"):
                b.__dlpack__(stream=s)
        for s in (None, -1, 0):
            adr.from_dlpack(b.__dlpack__(stream=s)).free()
    else:
        for s in (-1, 0, 1, 2, 12345):
            with pytest.raises(ValueError, match="stream must be None"):
                b.__dlpack__(stream=s)
        adr.from_dlpack(b.__dlpack__(stream=None)).free()
    with pytest.raises(TypeError):
        b.__dlpack__(None)  # keyword-only, as the spec says


def test_max_version_and_copy_arguments(cpu):
    b = cpu.alloc(8)
    with pytest.raises(TypeError, match="max_version"):
        b.__dlpack__(max_version=1)
    with pytest.raises(TypeError, match="max_version"):
        b.__dlpack__(max_version=(1,))
    with pytest.raises(TypeError, match="copy must be a bool"):
        b.__dlpack__(copy=1)
    with pytest.raises(TypeError, match="dl_device"):
        b.__dlpack__(dl_device="cpu")


def test_dl_device_and_copy(device, cpu):
    b = device.alloc(16)
    b.copy_from(bytes(range(16)))
    same = (device.type, device.id)
    v = adr.from_dlpack(b.__dlpack__(dl_device=same, copy=False))
    assert v.ptr == b.ptr
    c = adr.from_dlpack(b.__dlpack__(copy=True, max_version=(1, 0)))
    assert c.ptr != b.ptr and c.device is device and c.to_bytes() == bytes(range(16))
    h = adr.from_dlpack(b.__dlpack__(dl_device=(1, 0)))
    assert h.device is cpu and h.to_bytes() == bytes(range(16))
    if device is not cpu:
        with pytest.raises(BufferError, match="needs a copy and copy=False"):
            b.__dlpack__(dl_device=(1, 0), copy=False)
    with pytest.raises(BufferError, match="cannot export to dl_device"):
        b.__dlpack__(dl_device=(1, 9))
    with pytest.raises(BufferError, match="cannot export to dl_device"):
        b.__dlpack__(dl_device=(99, 0))


def test_versioned_flags(cpu):
    b = cpu.alloc(8)

    class Versioned(ctypes.Structure):
        _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                    ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                    ("flags", ctypes.c_uint64), ("data", ctypes.c_void_p),
                    ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                    ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                    ("lanes", ctypes.c_uint16)]

    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    for copy, flags in ((None, 0), (True, 2)):
        cap = b.__dlpack__(max_version=(1, 0), copy=copy)
        t = Versioned.from_address(get(cap, b"dltensor_versioned"))
        assert (t.major, t.minor, t.flags) == (1, 0, flags)
        assert (t.device_type, t.device_id, t.ndim, t.code, t.bits, t.lanes) == (1, 0, 1, 1, 8, 1)
        assert (t.data == b.ptr) == (copy is None)
    del cap, t
    gc.collect()
    b.free()


def test_capsule_outlives_producer_reference(device):
    b = device.alloc(64)
    b.fill(3)
    cap = b.__dlpack__()
    del b
    gc.collect()
    v = adr.from_dlpack(cap)  # the capsule kept the buffer alive
    assert v.to_bytes() == b"\3" * 64


class Recorder:
    """A producer that records the stream the consumer asks for."""

    def __init__(self, buf):
        self.buf = buf
        self.streams = []

    def __dlpack_device__(self):
        return self.buf.__dlpack_device__()

    def __dlpack__(self, *, stream=None, max_version=None):
        self.streams.append(stream)
        return self.buf.__dlpack__(stream=stream, max_version=max_version)


def test_consumer_passes_the_stream_it_uses(device):
    r = Recorder(device.alloc(8))
    adr.from_dlpack(r)
    s = device.stream()
    adr.from_dlpack(r, stream=s)
    if device.kind in ("cuda", "cuda_host", "cuda_managed", "hip", "hip_host"):
        adr.from_dlpack(r, stream=-1)  # an int goes to the producer as given
        # adr's calls without a stream run on the device's default stream
        assert r.streams == [device.default_stream().handle, s.handle, -1]
    else:
        assert r.streams == [None, None]  # no DLPack stream for this memory
        with pytest.raises(ValueError, match="stream must be None"):
            adr.from_dlpack(r, stream=-1)  # passed as given; adr's producer refuses it
    s.destroy()
    with pytest.raises(ValueError, match="stream was destroyed"):
        adr.from_dlpack(r, stream=s)
