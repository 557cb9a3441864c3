#!/usr/bin/env bash
# Builds adr twice and runs every test suite in both builds:
#   build-ci    plain, warnings are errors
#   build-san   AddressSanitizer + UndefinedBehaviorSanitizer (+ LeakSanitizer)
# then the core, CPU and memory suites under ThreadSanitizer. Suites whose hardware
# is absent (gpu) exit 77 and are reported as SKIP.
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

[ -d build-tsan ] || CC=clang meson setup build-tsan -Db_sanitize=thread -Db_lundef=false \
  -Dopencl=disabled -Dvulkan=disabled -Dcuda=disabled -Dhip=disabled >/dev/null
run build-tsan core cpu memory
echo "test.sh: all suites passed in the plain, ASan/UBSan and TSan builds"
