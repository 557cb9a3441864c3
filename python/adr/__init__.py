# SPDX-License-Identifier: Apache-2.0
"""adr, the Arrow Device Runtime, for Python.

Devices, streams, events and buffers on every device adr reaches (CPU,
OpenCL, Vulkan, CUDA, HIP), with DLPack and the CUDA Array Interface.
docs/python.md is the guide; the C extension adr._adr does the work.
"""

import importlib.util as _util

if _util.find_spec(__name__ + "._adr") is not None:
    from . import _adr
else:  # the build tree: meson builds the extension outside this package
    import _adr

Error = _adr.Error
Device = _adr.Device
Stream = _adr.Stream
Event = _adr.Event
Buffer = _adr.Buffer
Array = _adr.Array
ArrayStream = _adr.ArrayStream
devices = _adr.devices
default_device = _adr.default_device
from_dlpack = _adr.from_dlpack
asarray = _adr.asarray

__version__ = _adr.version()

__all__ = [
    "Array",
    "ArrayStream",
    "Buffer",
    "Device",
    "Error",
    "Event",
    "Stream",
    "asarray",
    "default_device",
    "devices",
    "from_dlpack",
]
