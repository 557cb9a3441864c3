# SPDX-License-Identifier: Apache-2.0
"""The CUDA Array Interface against an independent implementation: Numba's
CUDA target (Debian python3-numba 0.56), driven by the CUDA driver
simulator (the python-cuda-sim meson test points NUMBA_CUDA_DRIVER at
it). Numba consumes adr's buffers (numba.cuda.as_cuda_array) and produces
arrays adr consumes (adr.asarray), streams included.

Numba's simulator (NUMBA_ENABLE_CUDASIM=1) cannot serve: it has no device
memory (its "device arrays" are NumPy arrays), no as_cuda_array and no
__cuda_array_interface__. Numba's real target can. At initialisation it
binds cuIpcOpenMemHandle, which the driver simulator has had since the
sharing work; with a driver library without it, Numba's IPC set-up
(unused here) is skipped. Nothing is compiled (no NVVM): only Numba's
driver bindings and device arrays are used.

Skips, with the reason, without numba or without a CUDA device.
"""
import ctypes
import os
import threading

import numpy as np
import pytest

import adr
from conftest import ALL

numba = pytest.importorskip("numba", reason="numba is not installed (Debian: python3-numba)")

if "cuda:0" not in ALL:
    pytest.skip(f"no CUDA device (the python-cuda-sim test has the simulator); have {ALL}",
                allow_module_level=True)
if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
    pytest.skip("NUMBA_ENABLE_CUDASIM=1: Numba's simulator has no device memory to share",
                allow_module_level=True)

from numba import cuda  # noqa: E402
from numba.cuda.cudadrv import driver as numba_driver  # noqa: E402

# Numba binds cuIpcOpenMemHandle eagerly for IPC (not used here); a driver
# library without it (older simulators) would fail its initialisation.
_driver_path = os.environ.get("NUMBA_CUDA_DRIVER", "libcuda.so.1")
if not hasattr(ctypes.CDLL(_driver_path), "cuIpcOpenMemHandle"):
    numba_driver.Driver._initialize_extras = lambda self: None

from test_stream_ops import Gate  # noqa: E402

N = 4096


@pytest.fixture
def dev():
    return adr.Device("cuda:0")


def test_numba_reads_an_adr_buffer(dev):
    buf = dev.alloc(N)
    src = (np.arange(N) % 251).astype(np.uint8)
    buf.copy_from(src)
    arr = cuda.as_cuda_array(buf)
    assert arr.shape == (N,) and arr.dtype == np.uint8
    assert arr.__cuda_array_interface__["data"][0] == buf.ptr
    assert (arr.copy_to_host() == src).all()


def test_numba_waits_for_adr_queued_work(dev):
    s = dev.stream()
    buf = dev.alloc(N)
    buf.fill(0)
    g = Gate(dev, s)
    buf.fill(0x5A, stream=s)  # queued behind the gate
    assert buf.__cuda_array_interface__["stream"] == s.handle
    assert g.holding()
    opener = threading.Timer(0.2, g.open)
    opener.start()
    # Numba synchronises on the stream the interface names before use.
    arr = cuda.as_cuda_array(buf)
    assert (arr.copy_to_host() == 0x5A).all()
    opener.join()


def test_adr_reads_a_numba_array(dev):
    src = np.arange(1000, dtype=np.float32)
    d = cuda.to_device(src)
    view = adr.asarray(d)
    assert view.device.kind.startswith("cuda") and len(view) == src.nbytes
    assert np.frombuffer(view.to_bytes(), np.float32).tolist() == src.tolist()
    # and writes it: Numba sees adr's copy
    view.copy_from(np.full(1000, 2.5, np.float32))
    assert (d.copy_to_host() == 2.5).all()


def test_adr_orders_on_a_numba_stream(dev):
    ns = cuda.stream()
    src = np.full(N // 4, 7, np.int32)
    d = cuda.to_device(src, stream=ns)  # asynchronous on Numba's stream
    cai = d.__cuda_array_interface__
    assert cai["stream"] == ns.handle.value
    consumer = dev.stream()
    view = adr.asarray(d, stream=consumer)
    out = adr.Device("cuda_host:0").alloc(view.nbytes) if "cuda_host:0" in ALL else None
    if out is not None:
        out.copy_from(view, stream=consumer)
        consumer.synchronize()
        assert np.frombuffer(memoryview(out), np.int32).tolist() == src.tolist()
    assert np.frombuffer(view.to_bytes(), np.int32).tolist() == src.tolist()
