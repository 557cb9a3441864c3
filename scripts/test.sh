#!/usr/bin/env bash
# Builds adr twice and runs every test suite in both builds:
#   build-ci    plain, warnings are errors
#   build-san   AddressSanitizer + UndefinedBehaviorSanitizer (+ LeakSanitizer)
# (between the two, build-ci is installed into a scratch prefix and three
# consumers are built against it: scripts/install_check.sh),
# then every threaded suite under ThreadSanitizer (build-tsan, clang), vendor
# drivers included (their internal reports are listed in tests/tsan.supp),
# then the libFuzzer targets against an instrumented core (build-fuzz).
# Suites whose hardware is absent (gpu) exit 77 and are reported as SKIP.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh

jobs=$(nproc)
# run DIR [SUITE | --no-suite SUITE]...
run() {
  local dir=$1; shift
  local args=()
  while [ $# -gt 0 ]; do
    if [ "$1" = --no-suite ]; then args+=(--no-suite "$2"); shift 2
    else args+=(--suite "$1"); shift; fi
  done
  ninja -C "$dir"
  meson test -C "$dir" --num-processes "$jobs" --print-errorlogs "${args[@]}"
}

[ -d build-ci ] || meson setup build-ci -Dwerror=true >/dev/null
# The fault sweeps (each a dozen conformance runs) run in the ASan build,
# which checks the same error paths for memory errors and leaks too.
run build-ci --no-suite fault-sweep

# The install as a packager and an application see it: a scratch prefix,
# the tools run from it, consumers built with pkg-config, meson and CMake,
# LD_LIBRARY_PATH unset (scripts/install_check.sh; 12 s idle, 28 s at load 9 on 2 cores).
scripts/install_check.sh build-ci

[ -d build-san ] || meson setup build-san -Dwerror=true -Db_sanitize=address,undefined \
  -Db_lundef=false >/dev/null
# NumPy's own test suite under adr's allocator (python-numpy, about 90 s)
# runs in the plain build only: ASan would check NumPy's code, not adr's.
run build-san --no-suite python-numpy

# Every backend (a build-tsan configured by an older test.sh had them disabled).
tsan_backends=(-Dopencl=auto -Dvulkan=auto -Dcuda=auto -Dhip=auto)
if [ -d build-tsan ]; then
  meson configure build-tsan "${tsan_backends[@]}" >/dev/null
else
  CC=clang meson setup build-tsan -Db_sanitize=thread -Db_lundef=false "${tsan_backends[@]}" >/dev/null
fi
SECONDS=0
# The fault sweeps run here with the smallest sample (N = 1, 2, 3 and one
# spread point; the ASan build takes four) over the dispatched calls only
# (the core's own allocations fail on the same paths): each sweep point is
# a whole conformance run, about 25 s under TSan, and the error paths'
# races are what this build adds.
ADR_FAULT_SWEEP=1 run build-tsan core cpu memory opencl vulkan array conformance cuda-sim hip-sim spill ipc \
  --no-suite fault-sweep-malloc
echo "test.sh: ThreadSanitizer suites took ${SECONDS} s"
# The libFuzzer targets, linked against a core instrumented for coverage
# (-Dfuzzing=true, clang, ASan/UBSan), 3 s each from tests/fuzz/corpus.
# Only the fuzz targets and the CPU backend are built in this directory.
[ -d build-fuzz ] || CC=clang meson setup build-fuzz -Dwerror=true -Dfuzzing=true \
  -Db_sanitize=address,undefined -Db_lundef=false -Dtools=false \
  -Dopencl=disabled -Dvulkan=disabled -Dcuda=disabled -Dhip=disabled >/dev/null
meson compile -C build-fuzz adr_cpu fuzz_format_libfuzzer fuzz_validate_libfuzzer \
  fuzz_validate_full_libfuzzer fuzz_env_libfuzzer fuzz_ipc_libfuzzer >/dev/null
meson test -C build-fuzz --no-rebuild --num-processes "$jobs" --print-errorlogs --suite fuzz
echo "test.sh: all suites passed in the plain, ASan/UBSan, TSan and libFuzzer builds"
