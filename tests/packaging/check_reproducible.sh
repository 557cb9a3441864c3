#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# Reproducible builds: no absolute path of the machine that built adr is in
# what adr installs (the library, the backends, the tools). The source and
# build directories are mapped away by -ffile-prefix-map (meson.build) and
# the core finds its build tree at run time (core/buildtree.c).
#
#   check_reproducible.sh SOURCE_ROOT BUILD_ROOT FILE...
set -u
src=$1
build=$2
shift 2
failures=0
for f in "$@"; do
  for root in "$build" "$src"; do
    hits=$(strings -a "$f" | grep -cF "$root")
    if [ "$hits" -ne 0 ]; then
      echo "FAIL: $f contains $root $hits times:"
      strings -a "$f" | grep -F "$root" | head -3
      failures=$((failures + 1))
    else
      echo "ok: $f does not contain $root"
    fi
  done
done
# The check can fail: a string that holds the build root is found.
probe=$(mktemp)
printf 'x\0%s/core/alloc.c\0y' "$build" >"$probe"
if [ "$(strings -a "$probe" | grep -cF "$build")" -eq 1 ]; then
  echo "ok: the check finds a planted build path"
else
  echo "FAIL: the check misses a planted build path"
  failures=$((failures + 1))
fi
rm -f "$probe"
exit $((failures != 0))
