# SPDX-License-Identifier: Apache-2.0
"""adr, the Arrow Device Runtime, for Python.

Devices, streams, events and buffers on every device adr reaches (CPU,
OpenCL, Vulkan, CUDA, HIP), with DLPack and the CUDA Array Interface.
docs/python.md is the guide; the C extension adr._adr does the work.
"""

try:
    from . import _adr
except ImportError:  # the build tree: the extension sits outside this package
    import _adr

Error = _adr.Error
Device = _adr.Device
Stream = _adr.Stream
Event = _adr.Event
Buffer = _adr.Buffer
devices = _adr.devices
default_device = _adr.default_device
from_dlpack = _adr.from_dlpack

__version__ = _adr.version()

__all__ = [
    "Buffer",
    "Device",
    "Error",
    "Event",
    "Stream",
    "default_device",
    "devices",
    "from_dlpack",
]
