# SPDX-License-Identifier: Apache-2.0
"""stream= on Buffer.copy_to/copy_from/fill and Array.to_device/to_host.

With a stream the operation is queued and the call returns at once; the
result is usable after stream.synchronize() or an event wait; without one
it has completed on return. The ordering is shown from the application's
side: a gate (an OpenCL user event behind a barrier on adr's queue, or a
host function on the CUDA simulator's stream that blocks until opened)
holds the stream, the calls return while it holds, nothing has run (the
destination's raw bytes are unchanged, an event recorded after them is
not complete), and after the gate opens and the stream is synchronised the
bytes are right. A watchdog opens a gate after 30 s so that a call that
blocks fails the test instead of hanging it.
"""
import ctypes
import gc
import threading

import numpy as np
import pytest

import adr
from conftest import ALL, device_or_skip

N = 1 << 16
GATED = [n for n in ("opencl:0", "cuda:0", "cuda_managed:0") if n in ALL]


def pattern(n=N, seed=1):
    return ((np.arange(n, dtype=np.uint32) * 2654435761 + seed) >> 13).astype(np.uint8)


class Gate:
    """Holds `stream` until open(); a watchdog opens it after 30 s."""

    def __init__(self, dev, stream):
        self.fired = False
        self.opened = False
        self._lock = threading.Lock()
        if dev.kind == "opencl":
            self._init_opencl(dev, stream)
        else:
            self._init_cuda(stream)
        self._timer = threading.Timer(30.0, self._watchdog)
        self._timer.daemon = True
        self._timer.start()

    def _init_opencl(self, dev, stream):
        cl = ctypes.CDLL("libOpenCL.so.1")
        vp, i32 = ctypes.c_void_p, ctypes.c_int32
        cl.clCreateUserEvent.restype = vp
        cl.clCreateUserEvent.argtypes = [vp, ctypes.POINTER(i32)]
        cl.clEnqueueBarrierWithWaitList.argtypes = [vp, ctypes.c_uint32, ctypes.POINTER(vp), vp]
        cl.clEnqueueBarrierWithWaitList.restype = i32
        cl.clSetUserEventStatus.argtypes = [vp, i32]
        cl.clSetUserEventStatus.restype = i32
        cl.clReleaseEvent.argtypes = [vp]
        cl.clFlush.argtypes = [vp]
        err = i32(0)
        ev = cl.clCreateUserEvent(dev.native("context"), ctypes.byref(err))
        assert err.value == 0 and ev, f"clCreateUserEvent: {err.value}"
        waits = (vp * 1)(ev)
        rc = cl.clEnqueueBarrierWithWaitList(stream.handle, 1, waits, None)
        assert rc == 0, f"clEnqueueBarrierWithWaitList: {rc}"
        cl.clFlush(stream.handle)

        def release():
            assert cl.clSetUserEventStatus(ev, 0) == 0  # CL_COMPLETE
            cl.clReleaseEvent(ev)

        self._release = release

    def _init_cuda(self, stream):
        cu = ctypes.CDLL("libcuda.so.1")
        fn_t = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
        cu.cuLaunchHostFunc.argtypes = [ctypes.c_void_p, fn_t, ctypes.c_void_p]
        ev = threading.Event()
        # Runs on the simulator's stream thread; waits without the GIL.
        self._fn = fn_t(lambda _arg: ev.wait(60))
        rc = cu.cuLaunchHostFunc(stream.handle, self._fn, None)
        assert rc == 0, f"cuLaunchHostFunc: {rc}"
        self._release = ev.set

    def _watchdog(self):
        with self._lock:
            if self.opened:
                return
            self.fired = True
        self.open()

    def open(self):
        with self._lock:
            if self.opened and not self.fired:
                return
            first = not self.opened
            self.opened = True
        self._timer.cancel()
        if first:
            self._release()

    def holding(self):
        """The calls so far returned while the gate held (the watchdog did
        not have to open it)."""
        assert not self.fired, "a call blocked until the watchdog opened the gate"
        return True


@pytest.fixture(params=GATED or ["none"])
def gated(request):
    if request.param == "none":
        pytest.skip(f"no device whose stream a test can gate (opencl, cuda); have {ALL}")
    return adr.Device(request.param)


def raw(buf):
    """The bytes at buf.ptr now, without waiting for queued work."""
    assert buf.device.host_accessible
    return ctypes.string_at(buf.ptr, buf.nbytes)


def host_for(dev):
    """Host memory whose copies with `dev` are asynchronous: CUDA copies to
    pageable memory block in the driver (and uploads from it return once it
    was read), so CUDA devices get pinned memory (cuda_host:0); others the
    CPU device's."""
    if dev.kind.startswith("cuda"):
        return device_or_skip("cuda_host:0")
    return adr.Device("cpu")


def upload_source(dev, data):
    """`data` as the source of a queued upload to `dev`: NumPy's memory
    itself where that is asynchronous, else a pinned copy."""
    if not dev.kind.startswith("cuda"):
        return data
    b = host_for(dev).alloc(len(data))
    b.copy_from(data)
    return b


def test_copies_return_before_they_run(gated):
    s = gated.stream()
    dev_buf = gated.alloc(N)
    dev_buf.fill(0)
    out = host_for(gated).alloc(N)
    out.fill(0xAA)
    src = upload_source(gated, pattern())
    expect = pattern().tobytes()
    g = Gate(gated, s)
    dev_buf.copy_from(src, stream=s)  # host -> device, queued
    out.copy_from(dev_buf, stream=s)  # device -> host, queued
    mark = gated.event()
    mark.record(s)
    assert g.holding()
    assert mark.query() is False
    assert raw(out) == b"\xaa" * N  # nothing ran yet
    if isinstance(src, np.ndarray):
        del src  # the buffer holds NumPy's memory until the copy ran
        gc.collect()
    g.open()
    s.synchronize()
    assert raw(out) == expect
    assert dev_buf.to_bytes() == expect
    s.destroy()


def test_result_usable_after_an_event_wait(gated):
    s = gated.stream()
    src = gated.alloc(N)
    src.copy_from(pattern(seed=3))
    g = Gate(gated, s)
    out = src.copy_to(host_for(gated), stream=s)
    ev = gated.event()
    ev.record(s)
    assert g.holding()
    assert ev.query() is False
    g.open()
    ev.synchronize()
    assert raw(out) == pattern(seed=3).tobytes()


def test_other_stream_waits_for_queued_work(gated):
    s1, s2 = gated.stream(), gated.stream()
    buf = gated.alloc(N)
    g = Gate(gated, s1)
    buf.fill(0x11, stream=s1)  # held by the gate
    buf.fill(0x22, stream=s2)  # must run after the first fill
    mark = gated.event()
    mark.record(s2)
    assert g.holding()
    assert mark.query() is False  # s2 waits for s1's fill
    g.open()
    s2.synchronize()
    assert buf.to_bytes() == b"\x22" * N


def test_blocking_call_waits_for_queued_work(gated):
    s = gated.stream()
    buf = gated.alloc(N)
    buf.fill(0)
    g = Gate(gated, s)
    buf.fill(0x33, stream=s)
    assert g.holding()
    opener = threading.Timer(0.2, g.open)
    opener.start()
    # No synchronize: to_bytes (no stream) waits for the queued fill.
    assert buf.to_bytes() == b"\x33" * N
    opener.join()
    assert not g.fired


def test_free_with_queued_work_is_stream_ordered(gated):
    s = gated.stream()
    before = gated.memory_info()["allocated_bytes"]["current"]
    buf = gated.alloc(N)
    g = Gate(gated, s)
    buf.fill(0x44, stream=s)
    buf.free()  # returns: adr_free on the stream, after the fill
    del buf
    assert g.holding()
    g.open()
    s.synchronize()
    assert gated.memory_info()["allocated_bytes"]["current"] == before


def test_stream_ordered_alloc(gated):
    s = gated.stream()
    g = Gate(gated, s)
    buf = gated.alloc(N, stream=s)  # ready for work on s
    buf.fill(0x77, stream=s)
    mark = gated.event()
    mark.record(s)
    assert g.holding()
    assert mark.query() is False
    opener = threading.Timer(0.2, g.open)
    opener.start()
    assert buf.to_bytes() == b"\x77" * N  # waits for s
    opener.join()


def test_array_to_device_is_queued(gated):
    s = gated.stream()
    arr = adr.Array.from_numpy(np.arange(10000, dtype=np.int64))
    g = Gate(gated, s)
    on_dev = arr.to_device(gated, stream=s)
    mark = gated.event()
    mark.record(s)
    assert g.holding()
    assert mark.query() is False
    del arr  # the copy holds its source until it ran
    gc.collect()
    g.open()
    s.synchronize()
    back = on_dev.to_host(stream=s)
    assert (back.to_numpy() == np.arange(10000)).all()


def test_array_sync_event_follows_the_copies(gated):
    s = gated.stream()
    arr = adr.Array.from_numpy(np.arange(5000, dtype=np.float64))
    g = Gate(gated, s)
    on_dev = arr.to_device(gated, stream=s)
    assert g.holding()
    opener = threading.Timer(0.2, g.open)
    opener.start()
    # to_host (no stream) waits for the array's sync_event.
    assert (on_dev.to_host().to_numpy() == np.arange(5000)).all()
    opener.join()


def test_dlpack_export_waits_for_queued_work(gated):
    s = gated.stream()
    src = gated.alloc(N)
    src.copy_from(pattern(seed=5))
    out = host_for(gated).alloc(N)
    out.fill(0)
    g = Gate(gated, s)
    out.copy_from(src, stream=s)
    assert g.holding()
    opener = threading.Timer(0.2, g.open)
    opener.start()
    # stream=None: the producer makes the memory ready for any stream.
    assert np.from_dlpack(out).tobytes() == pattern(seed=5).tobytes()
    opener.join()


# ---- CUDA (simulator): the stream rules of DLPack and the CAI ------------


def cuda_or_skip():
    return device_or_skip("cuda:0")


def test_cai_reports_the_pending_stream():
    dev = cuda_or_skip()
    s = dev.stream()
    buf = dev.alloc(N)
    g = Gate(dev, s)
    buf.fill(0x55, stream=s)
    cai = buf.__cuda_array_interface__
    assert cai["stream"] == s.handle and cai["stream"] not in (0, None)
    assert g.holding()
    # adr's own consumer orders its stream on the reported one.
    other = dev.stream()
    view = adr.asarray(buf, stream=other)
    mark = dev.event()
    mark.record(other)
    assert mark.query() is False
    g.open()
    other.synchronize()
    assert view.to_bytes() == b"\x55" * N
    s.synchronize()
    assert buf.__cuda_array_interface__["stream"] is None


def test_dlpack_consumer_stream_waits():
    dev = cuda_or_skip()
    s, consumer = dev.stream(), dev.stream()
    buf = dev.alloc(N)
    g = Gate(dev, s)
    buf.fill(0x66, stream=s)
    # stream=-1: no synchronisation; a consumer's stream: it waits (device-side).
    unsynced = buf.__dlpack__(stream=-1)
    del unsynced
    cap = buf.__dlpack__(stream=consumer.handle, max_version=(1, 0))
    mark = dev.event()
    mark.record(consumer)
    assert g.holding()
    assert mark.query() is False
    del cap
    view = adr.from_dlpack(buf, stream=consumer)
    g.open()
    consumer.synchronize()
    assert view.to_bytes() == b"\x66" * N


# ---- every device: function without a gate, bad arguments ----------------


def test_async_round_trip_every_device(device, cpu):
    with device.stream() as s:
        src = pattern(seed=7)
        buf = device.alloc(N)
        buf.copy_from(src, stream=s)
        back = buf.copy_to(cpu, stream=s)
        part = device.alloc(N)
        part.fill(9, stream=s)
        part.copy_from(buf, 0, stream=s)
        s.synchronize()
        assert bytes(memoryview(back)) == src.tobytes()
        assert part.to_bytes() == src.tobytes()
        fresh = device.alloc(N, stream=s)
        fresh.copy_from(buf, stream=s)
        assert fresh.to_bytes() == src.tobytes()
        arr = adr.Array.from_numpy(np.arange(777, dtype=np.int32))
        copy = arr.to_device(device, stream=s)
        host = copy.to_host(stream=s)
        assert (host.to_numpy() == np.arange(777)).all()
        assert copy.equals(arr)


def test_stream_arguments_are_checked(device, cpu):
    buf = device.alloc(16)
    with pytest.raises(TypeError):
        buf.copy_to(cpu, stream="default")
    with pytest.raises(TypeError):
        buf.fill(1, stream=1)
    s = device.stream()
    s.destroy()
    with pytest.raises(ValueError, match="destroyed"):
        buf.copy_from(b"x" * 16, stream=s)
    with pytest.raises(ValueError, match="destroyed"):
        adr.Array.from_numpy(np.arange(3)).to_device(device, stream=s)


def test_stream_of_another_device_is_refused(cpu):
    others = [n for n in ALL if n != "cpu:0"]
    if not others:
        pytest.skip(f"needs a device besides cpu:0; have {ALL}")
    other = adr.Device(others[0])
    a, b = cpu.alloc(64), cpu.alloc(64)
    with other.stream() as s:
        with pytest.raises(adr.Error) as e:
            a.copy_from(b, stream=s)
        assert e.value.errno != 0
        with pytest.raises(adr.Error):
            cpu.alloc(64, stream=s)
    a.fill(1)  # still usable
    assert a.to_bytes() == b"\x01" * 64


def test_free_while_another_thread_waits(gated):
    """A thread waiting for queued work (GIL released) and another freeing
    the buffer: either free() refuses (the wait counts as a call in
    progress) and the waiter reads the right bytes, or the free came first
    and the waiter gets ValueError; never a read of freed memory."""
    s = gated.stream()
    buf = gated.alloc(N)
    g = Gate(gated, s)
    buf.fill(0x21, stream=s)
    out = {}

    def reader():
        try:
            out["bytes"] = buf.to_bytes()
        except ValueError as e:
            out["error"] = e

    t = threading.Thread(target=reader)
    t.start()
    try:
        buf.free()  # the reader may or may not be waiting yet
        freed = True
    except BufferError:
        freed = False
    assert g.holding()
    g.open()
    t.join(30)
    assert not t.is_alive()
    if freed:
        assert "error" in out or out.get("bytes") == b"\x21" * N
    else:
        assert out["bytes"] == b"\x21" * N
        buf.free()
    s.synchronize()
