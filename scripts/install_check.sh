#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Installs a built adr into a scratch prefix and uses it as a packager and
# an application would, with LD_LIBRARY_PATH unset (issue 13):
#   - the files are where README.md says (library, headers, adr.pc, the
#     CMake package, backends, tools, man pages, LICENSE);
#   - the tools carry a relative RUNPATH and run from the prefix;
#   - no absolute path of the build machine is in what was installed;
#   - the exported symbols are tests/packaging/libadr.symbols;
#   - adr-info from the prefix lists every installed backend, from the
#     prefix, and the CPU-driver ones (cpu, opencl, vulkan here) loaded;
#   - tests/packaging/consumer builds and runs with pkg-config, with meson's
#     dependency('adr') and with CMake's find_package(adr).
#
#   scripts/install_check.sh [BUILD_DIR]     (default build-ci; called by scripts/test.sh)
#
# The build directory's prefix is pointed at the scratch prefix for the
# install and set back afterwards; nothing is rebuilt.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
build=${1:-build-ci}
SECONDS=0
unset LD_LIBRARY_PATH ADR_DEVICE ADR_BACKENDS ADR_PLUGIN_PATH ADR_LOG ADR_ALLOC

option() {
  meson introspect "$build" --buildoptions |
    /usr/bin/python3 -c "import json,sys; print(next(o['value'] for o in json.load(sys.stdin) if o['name']=='$1'))"
}
old_prefix=$(option prefix)
prefix=$(mktemp -d /tmp/adr-prefix.XXXXXX)
work=$(mktemp -d /tmp/adr-consumers.XXXXXX)
cleanup() {
  meson configure "$build" --prefix="$old_prefix" >/dev/null && ninja -C "$build" >/dev/null || true
  rm -rf "$prefix" "$work"
}
trap cleanup EXIT

failures=0
ok() { echo "install_check: ok: $*"; }
fail() {
  echo "install_check: FAIL: $*"
  failures=$((failures + 1))
}

meson configure "$build" --prefix="$prefix" >/dev/null
# The new prefix takes effect when ninja regenerates the build (nothing is
# recompiled: no compile command depends on the prefix).
ninja -C "$build" >/dev/null
if [ "$(option prefix)" != "$prefix" ]; then
  echo "install_check: the build's prefix is not $prefix; not installing"
  exit 1
fi
libdir=$(option libdir)
bindir=$(option bindir)
meson install -C "$build" --no-rebuild --quiet >/dev/null
lib=$prefix/$libdir

for f in "$lib/libadr.so.0" "$lib/libadr.so" "$prefix/include/adr/adr.h" "$lib/pkgconfig/adr.pc" \
  "$lib/cmake/adr/adrConfig.cmake" "$lib/cmake/adr/adrConfigVersion.cmake" \
  "$lib/adr/backends/libadr_cpu.so" "$prefix/$bindir/adr-info" "$prefix/$bindir/adr-bench" \
  "$prefix/$bindir/adr-demo" "$prefix/share/man/man1/adr-info.1" "$prefix/share/man/man7/adr.7" \
  "$prefix/share/doc/adr/LICENSE"; do
  [ -e "$f" ] && ok "installed ${f#"$prefix"/}" || fail "missing ${f#"$prefix"/}"
done

for t in adr-info adr-bench adr-demo; do
  rp=$(readelf -d "$prefix/$bindir/$t" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
  [ "$rp" = "\$ORIGIN/../$libdir" ] && ok "$t RUNPATH $rp" || fail "$t RUNPATH '$rp'"
done

for f in "$lib/libadr.so.0" "$lib"/adr/backends/*.so "$prefix/$bindir"/adr-*; do
  # (grep reads all its input here: with pipefail, grep -q quitting at the
  # first match would make the writer die of SIGPIPE and fail the pipeline.)
  if strings -a "$f" | grep -F -e "$src" -e "$(cd "$build" && pwd)" >/dev/null; then
    fail "${f#"$prefix"/} contains the build machine's source or build path"
  fi
done
ok "no source or build path in the installed binaries"

/usr/bin/python3 tests/packaging/check_symbols.py "$lib/libadr.so.0" tests/packaging/libadr.symbols |
  tail -1 | grep -q " 0 problems" && ok "installed libadr exports tests/packaging/libadr.symbols" ||
  fail "installed libadr's symbols differ from tests/packaging/libadr.symbols"

# adr-info from the prefix: every installed backend, found in the prefix.
if "$prefix/$bindir/adr-info" --json >"$work/info.json"; then
  /usr/bin/python3 - "$work/info.json" "$lib/adr/backends" <<'PY' && ok "adr-info lists the installed backends" || fail "adr-info from the prefix"
import glob, json, os, sys
doc = json.load(open(sys.argv[1]))
installed = {os.path.basename(p)[len("libadr_"):-3]: p for p in glob.glob(sys.argv[2] + "/libadr_*.so")}
listed = {b["name"]: b for b in doc["backends"]}
bad = 0
for name, path in sorted(installed.items()):
    b = listed.get(name)
    good = b is not None and b["path"] == path
    if name in ("cpu", "opencl", "vulkan"):
        good = good and b["state"] == "loaded"
    print(f"  {name}: {b['state'] if b else 'not listed'} {b['path'] if b else ''}")
    bad += not good
sys.exit(1 if bad or "cpu" not in installed else 0)
PY
else
  fail "adr-info does not run from the prefix without LD_LIBRARY_PATH"
fi
"$prefix/$bindir/adr-info" --list | sed 's/^/  /'

# The UCX module (docs/ucx.md), when built: installed beside the backends'
# directory, found and loaded by the installed libadr, which itself links
# no UCX (adr-info --ucx loads the module; plain adr-info only finds it).
if [ -e "$lib/adr/modules/libadr_ucx.so" ]; then
  "$prefix/$bindir/adr-info" --json --ucx >"$work/info-ucx.json" &&
  /usr/bin/python3 -c 'import json, sys; u = json.load(open(sys.argv[1]))["ucx_module"]; sys.exit(0 if u["available"] and u["loaded"] and u["path"] == sys.argv[2] else 1)' \
    "$work/info-ucx.json" "$lib/adr/modules/libadr_ucx.so" &&
    ok "adr-info --ucx loads the installed UCX module" || fail "the installed UCX module does not load"
  readelf -d "$lib/libadr.so.0" | grep -q 'libucp' && fail "libadr links UCX" || ok "libadr links no UCX"
fi

export PKG_CONFIG_PATH=$lib/pkgconfig
consumer=tests/packaging/consumer
run_consumer() {
  local how=$1 exe=$2
  local out
  if out=$(env -u LD_LIBRARY_PATH "$exe" 2>&1) && ldd "$exe" | grep -F "$lib/libadr.so.0" >/dev/null; then
    ok "$how consumer: $out"
  else
    fail "$how consumer: $out"
  fi
}
# pkg-config
cc -o "$work/pc-consumer" "$consumer/consumer.c" $(pkg-config --cflags --libs adr) \
  -Wl,-rpath,"$(pkg-config --variable=libdir adr)" && run_consumer pkg-config "$work/pc-consumer" ||
  fail "pkg-config consumer does not build"
# meson dependency('adr')
if meson setup "$work/meson" "$consumer" >"$work/meson.log" 2>&1 && ninja -C "$work/meson" >>"$work/meson.log" 2>&1; then
  run_consumer meson "$work/meson/consumer"
else
  cat "$work/meson.log"
  fail "meson consumer does not build"
fi
# CMake find_package(adr)
if cmake -S "$consumer" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" >"$work/cmake.log" 2>&1 &&
  cmake --build "$work/cmake" >>"$work/cmake.log" 2>&1; then
  run_consumer cmake "$work/cmake/consumer"
else
  cat "$work/cmake.log"
  fail "cmake consumer does not build"
fi
# A version the package does not meet is refused.
mkdir -p "$work/cmake-v"
sed 's/find_package(adr 0.1 CONFIG REQUIRED)/find_package(adr 1.0 CONFIG REQUIRED)/' \
  "$consumer/CMakeLists.txt" >"$work/cmake-v/CMakeLists.txt"
cp "$consumer/consumer.c" "$work/cmake-v/"
if cmake -S "$work/cmake-v" -B "$work/cmake-v/b" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null 2>&1; then
  fail "find_package(adr 1.0) accepted adr $(pkg-config --modversion adr)"
else
  ok "find_package(adr 1.0) refuses adr $(pkg-config --modversion adr)"
fi

echo "install_check: $failures failed, ${SECONDS} s"
exit $((failures != 0))
