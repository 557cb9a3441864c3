# SPDX-License-Identifier: Apache-2.0
"""Shared fixtures: the devices this machine has, one test per device.

ADR_PY_TEST_REQUIRE=cuda (set by the python-cuda-sim meson test) makes a
missing CUDA device a failure instead of a skip.
"""
import os

import pytest

import adr

ALL = [d.name for d in adr.devices()]
REQUIRED = [k for k in os.environ.get("ADR_PY_TEST_REQUIRE", "").split(",") if k]


def pytest_sessionstart(session):
    for kind in REQUIRED:
        if not any(n.startswith(kind + ":") for n in ALL):
            raise pytest.UsageError(f"ADR_PY_TEST_REQUIRE={kind}: no {kind} device (have {ALL})")


def device_or_skip(name):
    if name not in ALL:
        pytest.skip(f"{name} not available here (devices: {', '.join(ALL)})")
    return adr.Device(name)


# The device kinds the tests know; test_devices.py::test_known_kind skips once
# per absent one with the reason, and the per-device tests run on what is here.
KNOWN = ["cpu:0", "opencl:0", "vulkan:0", "cuda:0", "cuda_host:0", "cuda_managed:0", "hip:0",
         "hip_host:0"]


@pytest.fixture(params=ALL)
def device(request):
    return adr.Device(request.param)


@pytest.fixture
def cpu():
    return adr.Device("cpu")
