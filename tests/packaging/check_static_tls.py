#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
#
# The static TLS adr takes from a process: libadr and the backend modules
# keep their per-thread look-up caches in initial-exec TLS (no
# __tls_get_addr call per copy or allocation), which glibc serves from the
# static TLS block, also when the library is opened with dlopen (Python's
# extension loads libadr that way, and libadr loads every backend so).
# glibc reserves a surplus of about 1.5 KiB for such libraries in the whole
# process (512 bytes of it "optional", glibc.rtld.optional_static_tls);
# adr keeps to a budget of 512 bytes for libadr and every module together
# so that other libraries keep the rest. Usage: check_static_tls.py LIB...
import re
import subprocess
import sys

BUDGET = 512


def tls_size(path):
    out = subprocess.run(["readelf", "-lW", path], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        f = line.split()
        if f and f[0] == "TLS":
            return int(f[5], 16)  # MemSiz
    return 0


def main():
    total = 0
    for path in sys.argv[1:]:
        n = tls_size(path)
        dyn = subprocess.run(["readelf", "-dW", path], capture_output=True, text=True,
                             check=True).stdout
        static = re.search(r"\(FLAGS\).*STATIC_TLS", dyn) is not None
        print(f"{path}: {n} bytes of TLS{' (initial-exec)' if static else ''}")
        total += n
    print(f"total {total} bytes, budget {BUDGET}")
    if total > BUDGET:
        print(f"FAIL: {total} bytes of TLS exceed the {BUDGET}-byte budget")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
