#!/usr/bin/env bash
# Installs what building and testing adr needs on Debian 12 (run as root).
# Vendor headers are build-time only; PoCL (OpenCL on the CPU), Mesa's
# lavapipe (Vulkan on the CPU) with the Khronos validation layer, and the
# HIP runtime (which finds no device here) are the real drivers the tests use.
# cmake builds the find_package(adr) consumer of scripts/install_check.sh;
# groff renders the man pages in tests/packaging. The Python module (python/)
# builds against /usr/bin/python3's headers and numpy, and its tests run with
# pytest; meson-python builds it as a wheel (pyproject.toml; it rewrites the
# RUNPATHs with patchelf), which the python-wheel test installs with pip;
# Numba's CUDA target is the independent CUDA Array Interface peer of
# python/tests/test_numba_cai.py. hypothesis is for NumPy's own test suite,
# which python-numpy-suite runs with adr's NEP 49 handler set. UCX (libucx-dev)
# builds the optional UCX module (docs/ucx.md); ucx-utils' ucx_perftest is
# the baseline of adr-bench ucx.
set -euo pipefail
packages=(
  build-essential meson ninja-build pkg-config libcmocka-dev clang
  ocl-icd-libopencl1 ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo
  libvulkan1 libvulkan-dev mesa-vulkan-drivers vulkan-validationlayers vulkan-tools
  glslang-tools glslc
  libamdhip64-dev libamdhip64-5
  valgrind
  cmake groff-base
  python3-dev python3-numpy python3-pytest python3-mesonpy python3-pip python3-numba patchelf
  python3-hypothesis
  libucx-dev ucx-utils
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Node.js and npm, and the Apache Arrow JavaScript implementation pinned in
# tests/ipc/interop/package-lock.json (the IPC interoperability test; its
# node_modules is git-ignored). A node that came with its own npm (as from
# NodeSource) is kept.
node_pkgs=()
command -v node >/dev/null 2>&1 || node_pkgs+=(nodejs)
command -v npm >/dev/null 2>&1 || node_pkgs+=(npm)
if ((${#node_pkgs[@]})); then
  echo "deps: installing ${node_pkgs[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${node_pkgs[@]}" >/dev/null
fi
interop="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tests/ipc/interop"
if ! cmp -s "$interop/package-lock.json" "$interop/node_modules/.adr-installed-lock" 2>/dev/null; then
  echo "deps: npm ci in tests/ipc/interop"
  (cd "$interop" && npm ci --no-audit --no-fund --loglevel=error >/dev/null &&
    cp package-lock.json node_modules/.adr-installed-lock)
fi
