# SPDX-License-Identifier: Apache-2.0
import pytest

import adr


def test_stream_event_order(device):
    s1 = device.stream()
    s2 = device.stream()
    ev = device.event()
    assert ev.query()  # never recorded: complete
    ev.record(s1)
    s2.wait(ev)
    s2.synchronize()
    ev.synchronize()
    assert ev.query()
    ev.record()  # the default stream
    ev.synchronize()
    assert s1.device is device and ev.device is device
    assert isinstance(s1.handle, int)
    s1.destroy()
    s2.destroy()
    ev.destroy()


def test_stream_context_manager(device):
    with device.stream() as s:
        assert not s.destroyed
        ev = device.event()
        ev.record(s)
    assert s.destroyed
    with pytest.raises(ValueError, match="stream was destroyed"):
        s.synchronize()
    with pytest.raises(ValueError, match="stream was destroyed"):
        ev.record(s)
    with pytest.raises(ValueError, match="stream was destroyed"):
        s.destroy()
    with device.event() as e2:
        e2.record()
    with pytest.raises(ValueError, match="event was destroyed"):
        e2.synchronize()
    with pytest.raises(ValueError, match="event was destroyed"):
        device.stream().wait(e2)


def test_default_stream_is_never_destroyed(device):
    s = device.default_stream()
    s.synchronize()
    with s:
        pass
    s2 = device.default_stream()
    s2.synchronize()
    assert "default" in repr(s2)


def test_wrong_types():
    cpu = adr.Device("cpu")
    s = cpu.stream()
    with pytest.raises(TypeError, match="expected an adr.Event"):
        s.wait(s)
    with pytest.raises(TypeError, match="expected an adr.Stream or None"):
        cpu.event().record(42)


def test_event_of_another_device_is_adr_error():
    others = [d for d in adr.devices() if d.kind != "cpu"]
    if not others:
        pytest.skip("only the cpu device here: no second device to mix")
    ev = others[0].event()
    s = adr.Device("cpu").stream()
    with pytest.raises(adr.Error) as e:
        ev.record(s)
    assert e.value.strerror.startswith("[adr_event_record]")


def test_streams_freed_by_refcount(device):
    for _ in range(50):
        s = device.stream()
        e = device.event()
        e.record(s)
        s.wait(e)
    del s, e
