# SPDX-License-Identifier: Apache-2.0
"""NumPy's own core and numpy.ma test suites ("fast" label) with adr's NEP 49
handler set, the way NumPy's test_mem_policy.py::test_new_policy runs them
under its secret_data_allocator (NEP 49's example). Not collected by pytest
(no test_ prefix): meson test python-numpy-suite runs it. Exit 77 (skip)
without hypothesis, which NumPy's test suite needs. About 1 CPU-minute."""
import sys

try:
    import hypothesis  # noqa: F401 - numpy.conftest imports it
except ImportError:
    print("skip: NumPy's test suite needs hypothesis (apt-get install python3-hypothesis)")
    sys.exit(77)

import numpy as np

import adr
import adr.numpy

handler = adr.numpy.allocator("cpu")
adr.numpy._adr.numpy_set_handler(handler)  # for the whole run, not a block
name = np.core.multiarray.get_handler_name(np.arange(3))
assert name == "adr:cpu:0:pool", name
before = adr.Device("cpu").memory_info()["allocated_count"]["total"]
args = ["-q", "-p", "no:cacheprovider"]
core = np.core.test("fast", extra_argv=args)
ma = np.ma.test("fast", extra_argv=args)
after = adr.Device("cpu").memory_info()["allocated_count"]["total"]
print(f"numpy.core: {'passed' if core else 'FAILED'}, numpy.ma: {'passed' if ma else 'FAILED'}, "
      f"{after - before} allocations through adr")
# Most of NumPy's allocations are served by the handler's per-thread cache
# of freed blocks; about 100 000 still reach adr (11 million without it).
assert after - before > 10_000
sys.exit(0 if core and ma else 1)
