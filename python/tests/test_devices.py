# SPDX-License-Identifier: Apache-2.0
import errno
import gc

import pytest

import adr
from conftest import KNOWN, device_or_skip


@pytest.mark.parametrize("name", KNOWN)
def test_known_kind(name):
    """Skips, saying why, for each device kind the per-device tests cannot cover here."""
    d = device_or_skip(name)
    assert d.name == name


def test_devices_lists_cpu_first_and_filters():
    devs = adr.devices()
    assert devs and devs[0].name == "cpu:0"
    assert adr.devices("cpu") == [adr.Device("cpu:0")]
    assert adr.devices("cpu:*") == [adr.Device("cpu:0")]
    assert [d.name for d in adr.devices("*")] == [d.name for d in devs]
    for d in devs:
        assert adr.devices(d.name) == [d]
        assert adr.devices(f"{d.kind},cpu")[0] in (d, adr.Device("cpu"))


def test_selector_errors():
    with pytest.raises(ValueError, match="unknown device kind 'gpu'"):
        adr.devices("gpu")
    with pytest.raises(ValueError, match="bad device id"):
        adr.devices("cpu:x")
    with pytest.raises(ValueError, match="empty selector"):
        adr.devices(",")
    with pytest.raises(TypeError):
        adr.devices(3)


def test_device_parse_and_identity(device):
    same = adr.Device(device.name)
    assert same is device
    assert adr.Device(device.kind, device.id) is device
    assert adr.Device(device.type, device.id) is device
    assert adr.Device(device) is device
    assert device.name == f"{device.kind}:{device.id}"
    assert repr(device) == f"<adr.Device {device.name}>"


def test_device_attributes_and_info(device):
    info = device.info()
    assert info["type"] == device.type
    assert info["kind"] == device.kind
    assert info["id"] == device.id
    assert info["name"] == device.name
    assert info["backend"]
    assert info["alignment"] >= 64
    assert ("host_accessible" in info["caps"]) == device.host_accessible


def test_memory_info_counts_allocations(device):
    gc.collect()
    before = device.memory_info()
    b = device.alloc(1000)
    during = device.memory_info()
    assert during["allocated_bytes"]["current"] == before["allocated_bytes"]["current"] + 1000
    assert during["allocated_count"]["current"] == before["allocated_count"]["current"] + 1
    b.free()
    after = device.memory_info()
    assert after["allocated_bytes"]["current"] == before["allocated_bytes"]["current"]
    assert "allocated" in after["summary"]


def test_default_device_is_cpu_without_adr_device():
    # meson's test environment leaves ADR_DEVICE unset
    assert adr.default_device() is adr.Device("cpu:0")


def test_bad_device_specs():
    with pytest.raises(ValueError, match="unknown device kind 'gpu'"):
        adr.Device("gpu:0")
    with pytest.raises(ValueError, match="bad device id"):
        adr.Device("cpu:-1")
    with pytest.raises(ValueError, match="bad device id"):
        adr.Device("cpu:0x")
    with pytest.raises(ValueError, match="unknown ArrowDeviceType 99"):
        adr.Device(99)
    with pytest.raises(ValueError, match="negative device id"):
        adr.Device("cpu", -3)
    with pytest.raises(TypeError):
        adr.Device(1.5)
    with pytest.raises(TypeError):
        adr.Device("cpu:0", 1)


def test_missing_device_is_adr_error_with_message():
    with pytest.raises(adr.Error) as e:
        adr.Device("cpu:7")
    assert isinstance(e.value, OSError)
    assert e.value.errno == errno.ENODEV
    assert e.value.strerror.startswith("[adr_device_get]")
    assert "cpu" in e.value.strerror


def test_absent_backend_says_why():
    if any(d.kind == "hip" for d in adr.devices()):
        pytest.skip("a hip device exists here")
    with pytest.raises(adr.Error) as e:
        adr.Device("hip:0")
    assert e.value.errno == errno.ENODEV
    assert "hip" in e.value.strerror
