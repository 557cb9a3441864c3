#!/usr/bin/env bash
# Builds adr twice and runs every test suite in both builds:
#   build-ci    plain, warnings are errors
#   build-san   AddressSanitizer + UndefinedBehaviorSanitizer (+ LeakSanitizer)
# then every threaded suite under ThreadSanitizer (build-tsan, clang), vendor
# drivers included (their internal reports are listed in tests/tsan.supp).
# Suites whose hardware is absent (gpu) exit 77 and are reported as SKIP.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh

jobs=$(nproc)
run() {
  local dir=$1; shift
  local suites=("$@")
  local args=()
  for s in "${suites[@]}"; do args+=(--suite "$s"); done
  ninja -C "$dir"
  meson test -C "$dir" --num-processes "$jobs" --print-errorlogs "${args[@]}"
}

[ -d build-ci ] || meson setup build-ci -Dwerror=true >/dev/null
run build-ci

[ -d build-san ] || meson setup build-san -Dwerror=true -Db_sanitize=address,undefined \
  -Db_lundef=false >/dev/null
run build-san

# Every backend (a build-tsan configured by an older test.sh had them disabled).
tsan_backends=(-Dopencl=auto -Dvulkan=auto -Dcuda=auto -Dhip=auto)
if [ -d build-tsan ]; then
  meson configure build-tsan "${tsan_backends[@]}" >/dev/null
else
  CC=clang meson setup build-tsan -Db_sanitize=thread -Db_lundef=false "${tsan_backends[@]}" >/dev/null
fi
SECONDS=0
run build-tsan core cpu memory opencl vulkan array conformance cuda-sim hip-sim
echo "test.sh: ThreadSanitizer suites took ${SECONDS} s"
echo "test.sh: all suites passed in the plain, ASan/UBSan and TSan builds"
