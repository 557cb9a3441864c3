# SPDX-License-Identifier: Apache-2.0
"""adr.asarray: the CUDA Array Interface consumer (shared/seeds/001).

Producer work is queued with the CUDA driver API itself (ctypes on
libcuda.so.1: the simulator in the python-cuda-sim* meson tests), so the
stream the producer reports really has pending work. The meson test
python-cuda-sim-cai sets ADR_SIM_DELAY_US, which makes every simulated copy
and memset sleep first: a missing wait then reads stale bytes for certain.
"""
import ctypes
import errno
import os

import pytest

import adr
from conftest import ALL

pytestmark = pytest.mark.skipif(not any(n.startswith("cuda:") for n in ALL),
                                reason=f"no CUDA device here (devices: {', '.join(ALL)})")

DELAYED = int(os.environ.get("ADR_SIM_DELAY_US", "0")) > 0


@pytest.fixture
def cu():
    lib = ctypes.CDLL("libcuda.so.1")
    for name, args in {"cuCtxPushCurrent_v2": [ctypes.c_void_p],
                       "cuCtxPopCurrent_v2": [ctypes.POINTER(ctypes.c_void_p)],
                       "cuMemsetD8Async": [ctypes.c_uint64, ctypes.c_ubyte, ctypes.c_size_t,
                                           ctypes.c_void_p],
                       "cuMemcpyDtoHAsync_v2": [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t,
                                                ctypes.c_void_p]}.items():
        getattr(lib, name).argtypes = args
        getattr(lib, name).restype = ctypes.c_int
    return lib


class Producer:
    """A foreign producer: an adr buffer reported through its own dict."""

    def __init__(self, buf, stream=None, **over):
        self.buf = buf
        self.cai = {"shape": (len(buf),), "typestr": "|u1", "data": (buf.ptr, False),
                    "version": 3, "strides": None, "stream": stream}
        self.cai.update(over)

    @property
    def __cuda_array_interface__(self):
        return self.cai


def memset_async(cu, dev, ptr, value, n, stream_handle):
    ctx = dev.native("context")
    assert cu.cuCtxPushCurrent_v2(ctx) == 0
    try:
        assert cu.cuMemsetD8Async(ptr, value, n, stream_handle) == 0
    finally:
        old = ctypes.c_void_p()
        assert cu.cuCtxPopCurrent_v2(ctypes.byref(old)) == 0


N = 4096


def test_host_waits_on_producer_stream(cu):
    dev = adr.Device("cuda:0")
    buf = dev.alloc(N)
    buf.fill(1)
    s = dev.stream()
    for value in (1, 1, 1, 1, 7):  # busy for 5 delays, as in the control below
        memset_async(cu, dev, buf.ptr, value, N, s.handle)
    v = adr.asarray(Producer(buf, stream=s.handle))
    assert v.device is dev and v.ptr == buf.ptr and len(v) == N and not v.owned
    assert v.to_bytes() == b"\7" * N


@pytest.mark.skipif(not DELAYED, reason="needs ADR_SIM_DELAY_US (meson test python-cuda-sim-cai)")
def test_without_the_stream_the_bytes_are_stale(cu):
    """The control: the test above would fail without asarray's wait."""
    dev = adr.Device("cuda:0")
    buf = dev.alloc(N)
    buf.fill(1)
    s = dev.stream()
    # Five delayed memsets: the producer's stream is busy for 5 delays, and
    # adr's read (one delay) lands long before the last one (7) has run.
    for value in (1, 1, 1, 1, 7):
        memset_async(cu, dev, buf.ptr, value, N, s.handle)
    v = adr.asarray(Producer(buf, stream=None))  # a producer that wrongly says "no sync"
    assert v.to_bytes() == b"\1" * N
    s.synchronize()
    assert v.to_bytes() == b"\7" * N


def test_consumer_stream_waits_device_side(cu):
    dev = adr.Device("cuda:0")
    buf = dev.alloc(N)
    buf.fill(1)
    producer_stream = dev.stream()
    consumer = dev.stream()
    for value in (1, 1, 1, 1, 9):
        memset_async(cu, dev, buf.ptr, value, N, producer_stream.handle)
    v = adr.asarray(Producer(buf, stream=producer_stream.handle), stream=consumer)
    host = ctypes.create_string_buffer(N)
    assert cu.cuCtxPushCurrent_v2(dev.native("context")) == 0
    assert cu.cuMemcpyDtoHAsync_v2(host, v.ptr, N, consumer.handle) == 0
    cu.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))
    consumer.synchronize()
    assert host.raw == b"\x09" * N


def test_legacy_and_per_thread_default_streams():
    dev = adr.Device("cuda:0")
    buf = dev.alloc(64)
    buf.fill(3)
    for s in (1, 2):
        assert adr.asarray(Producer(buf, stream=s)).to_bytes() == b"\3" * 64


def test_device_found_by_pointer():
    for kind in ("cuda", "cuda_host", "cuda_managed"):
        dev = adr.Device(kind + ":0")
        buf = dev.alloc(32)
        assert adr.asarray(Producer(buf)).device is dev
        assert adr.asarray(buf).device is dev  # adr's own producer
    dev1 = [d for d in adr.devices("cuda:1")]
    if dev1:
        b1 = dev1[0].alloc(8)
        assert adr.asarray(Producer(b1)).device is dev1[0]


def test_shapes_types_strides():
    dev = adr.Device("cuda:0")
    buf = dev.alloc(96)
    v = adr.asarray(Producer(buf, shape=(3, 4), typestr="<f8", strides=(32, 8)))
    assert len(v) == 96
    v = adr.asarray(Producer(buf, shape=(3, 1), typestr="<i4", strides=(4, 999)))
    assert len(v) == 12  # a dimension of extent 1 may have any stride
    v = adr.asarray(Producer(buf, shape=(2,), typestr="<U3"))
    assert len(v) == 24
    ro = adr.asarray(Producer(buf, data=(buf.ptr, True)))
    assert ro.readonly
    with pytest.raises(BufferError, match="read-only"):
        ro.copy_from(b"x")
    old = adr.asarray(Producer(buf, version=2, stream=0))  # v2 has no stream entry: ignored
    assert len(old) == 96


def test_zero_size():
    dev = adr.Device("cuda:0")
    z = adr.asarray(Producer(dev.alloc(8), shape=(0,), data=(0, False)))
    assert len(z) == 0 and z.device is dev
    z2 = adr.asarray(Producer(dev.alloc(8), shape=(0, 5), data=(0, False), strides=(-5, 7)))
    assert len(z2) == 0


@pytest.mark.parametrize("over,exc,msg", [
    ({"stream": 0}, ValueError, "stream 0 is disallowed"),
    ({"stream": -3}, ValueError, "stream must be None, 1, 2 or a CUstream"),
    ({"stream": True}, TypeError, "stream must be None or an int"),
    ({"version": 4}, ValueError, "version 4 is not supported"),
    ({"version": "3"}, TypeError, "version must be an int"),
    ({"strides": (-1,)}, ValueError, "negative strides"),
    ({"strides": (2,)}, ValueError, "non-contiguous strides"),
    ({"strides": (1, 1)}, ValueError, "strides must be None or a tuple of 1"),
    ({"shape": (-4,)}, ValueError, "negative shape"),
    ({"shape": [4]}, TypeError, "shape must be a tuple"),
    ({"typestr": "|O8"}, ValueError, "not a fixed-size NumPy type string"),
    ({"typestr": "u1"}, ValueError, "not a fixed-size NumPy type string"),
    ({"typestr": 5}, TypeError, "typestr must be a str"),
    ({"data": (0, False)}, ValueError, "data pointer 0 for a non-empty array"),
    ({"data": (1, 0)}, TypeError, "data must be a tuple"),
    ({"mask": object()}, ValueError, "masked arrays"),
    ({"shape": (2**62, 2**62)}, ValueError, "overflows"),
])
def test_bad_interfaces(over, exc, msg):
    buf = adr.Device("cuda:0").alloc(16)
    with pytest.raises(exc, match=msg):
        adr.asarray(Producer(buf, **over))


def test_bad_producers():
    with pytest.raises(TypeError, match="has no __cuda_array_interface__"):
        adr.asarray(3)
    with pytest.raises(TypeError, match="not a dict"):
        adr.asarray(type("P", (), {"__cuda_array_interface__": [1]})())
    p = Producer(adr.Device("cuda:0").alloc(8))
    del p.cai["typestr"]
    with pytest.raises(ValueError, match="has no 'typestr'"):
        adr.asarray(p)
    with pytest.raises(adr.Error) as e:  # memory no driver knows
        adr.asarray(Producer(adr.Device("cuda:0").alloc(8), data=(12345678, False)))
    assert e.value.errno == errno.ENOENT
    with pytest.raises(ValueError, match="not a CUDA device"):
        adr.asarray(Producer(adr.Device("cuda:0").alloc(8)), device="cpu")
    with pytest.raises(adr.Error):  # a CUstream the driver does not know
        adr.asarray(Producer(adr.Device("cuda:0").alloc(8), stream=0xdead0))
    with pytest.raises(TypeError, match="stream must be an adr.Stream"):
        adr.asarray(Producer(adr.Device("cuda:0").alloc(8)), stream=5)
    s = adr.Device("cuda:0").stream()
    s.destroy()
    with pytest.raises(ValueError, match="stream was destroyed"):
        adr.asarray(Producer(adr.Device("cuda:0").alloc(8)), stream=s)


def test_buffer_keeps_the_producer_alive():
    import gc
    import weakref
    buf = adr.Device("cuda:0").alloc(8)
    p = Producer(buf)
    r = weakref.ref(p)
    v = adr.asarray(p)
    del p, buf
    gc.collect()
    assert r() is not None
    v.free()
    gc.collect()
    assert r() is None
