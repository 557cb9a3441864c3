# SPDX-License-Identifier: Apache-2.0
"""__cuda_array_interface__ (v3, shared/seeds/001): on the CUDA simulator in
the python-cuda-sim meson test, and on a real GPU where there is one."""
import pytest

import adr

CUDA_KINDS = ("cuda", "cuda_host", "cuda_managed")


def test_cai_on_cuda_memory(device):
    if device.kind not in CUDA_KINDS:
        b = device.alloc(8)
        assert not hasattr(b, "__cuda_array_interface__")
        with pytest.raises(AttributeError, match="not CUDA memory"):
            b.__cuda_array_interface__
        return
    b = device.alloc(100)
    b.fill(9)
    cai = b.__cuda_array_interface__
    assert cai == {
        "shape": (100,),
        "typestr": "|u1",
        "data": (b.ptr, False),
        "version": 3,
        "strides": None,
        "descr": [("", "|u1")],
        "stream": None,  # every adr.Buffer operation has completed: nothing to wait for
    }
    assert "mask" not in cai
    assert cai["stream"] != 0


def test_cai_zero_size_and_freed(device):
    if device.kind not in CUDA_KINDS:
        pytest.skip(f"{device.name} is not CUDA memory (the interface is CUDA-only)")
    z = device.alloc(0)
    assert z.__cuda_array_interface__["data"] == (0, False)  # the seed: 0 for zero-size arrays
    assert z.__cuda_array_interface__["shape"] == (0,)
    z.free()
    with pytest.raises(ValueError, match="buffer was freed"):
        z.__cuda_array_interface__


def test_cai_readonly_import(device):
    if device.kind not in CUDA_KINDS:
        pytest.skip(f"{device.name} is not CUDA memory (the interface is CUDA-only)")
    b = device.alloc(16)
    v = adr.from_dlpack(b.__dlpack__(max_version=(1, 0)))
    assert v.__cuda_array_interface__["data"] == (b.ptr, False)
