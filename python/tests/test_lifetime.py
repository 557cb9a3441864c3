# SPDX-License-Identifier: Apache-2.0
"""Objects still alive when the interpreter exits: module globals, cycles,
unconsumed capsules (arrays and streams), buffers borrowed from NumPy,
work queued on streams and never waited for, NumPy blocks in the handler's
thread cache. Python frees what it frees
before adr's exit-time teardown (an atexit handler, after Py_Finalize);
whatever is left is abandoned. Either way: exit status 0, nothing printed."""
import os
import subprocess
import sys
import textwrap

import adr
from conftest import ALL

SCRIPT = textwrap.dedent("""
    import adr, numpy as np, threading
    keep = []
    for name in {names!r}:
        d = adr.Device(name)
        b = d.alloc(4096)
        b.fill(1)
        s = d.stream()
        e = d.event()
        e.record(s)
        keep += [b, s, e, b.__dlpack__(), adr.from_dlpack(d.alloc(64))]
        cyc = [d.alloc(16)]
        cyc.append(cyc)
        arr = adr.Array.from_numpy(np.arange(8, dtype=np.int64)).to_device(d)
        st = adr.ArrayStream.from_arrays([arr, arr])
        keep += [st.__arrow_c_device_stream__(), adr.ArrayStream.from_arrays([arr])]
        # queued work never waited for: a copy, a fill, a device array copy
        q = d.stream()
        qb = d.alloc(1 << 16)
        qb.copy_from(np.ones(1 << 16, np.uint8), stream=q)
        qb.fill(3, stream=q)
        keep += [qb, qb.copy_to("cpu", stream=q), arr.to_device(d, stream=q)]
    import adr.numpy
    with adr.numpy.use(adr.numpy.allocator("cpu")):
        for _ in range(10):
            np.ones(1000)  # blocks left in this thread's cache at exit
    a = np.arange(100)
    keep.append(adr.from_dlpack(a))
    host = adr.Device("cpu").alloc(64)
    keep.append(np.from_dlpack(host))
    keep.append(memoryview(host))
    t = threading.Thread(target=lambda: [adr.Device("cpu").alloc(8) for _ in range(1000)],
                         daemon=True)
    t.start()
    print("ready")
""")


def test_exit_with_live_objects():
    env = dict(os.environ)
    r = subprocess.run([sys.executable, "-c", SCRIPT.format(names=ALL)], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "ready\n"
    assert r.stderr == ""


def test_module_reports_version():
    assert adr.__version__ == adr._adr.version() and adr.__version__.count(".") == 2
