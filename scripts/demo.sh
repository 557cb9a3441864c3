#!/usr/bin/env bash
# Builds adr and runs the demo on the default device (ADR_DEVICE; the CPU
# when unset): adr-info, then an allocate/copy/verify round trip.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
[ -d build ] || meson setup build >/dev/null
ninja -C build
build/tools/adr-info
build/tools/adr-demo
