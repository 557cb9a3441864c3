#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# The build-tree marker (core/buildtree.c) cannot be planted: a copy of the
# core placed below a world-writable directory that holds an `adr-build-tree`
# file must not add that directory's backends/ to the search path. The same
# layout in a private directory must (the positive control, which shows the
# check can tell the two apart).
# Usage: test_build_marker.sh ADR_INFO LIBADR
set -eu
info=$1
lib=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
for mode in 1777 0755; do
  top="$work/top-$mode"
  mkdir -p "$top/prefix/lib"
  cp "$lib" "$top/prefix/lib/libadr.so.0"
  : > "$top/adr-build-tree"
  chmod "$mode" "$top"
  out=$(env -u ADR_PLUGIN_PATH LD_LIBRARY_PATH="$top/prefix/lib" "$info" --json)
  case "$out" in
    *"\"$top/backends/<name>\""*) found=yes ;;
    *) found=no ;;
  esac
  if [ "$mode" = 1777 ] && [ "$found" = yes ]; then
    echo "FAIL: a marker in world-writable $top was trusted"; status=1
  elif [ "$mode" = 0755 ] && [ "$found" = no ]; then
    echo "FAIL: the marker in private $top was not used (control): $out" | head -c 600; status=1
  else
    echo "ok: mode $mode, build-tree search path used: $found"
  fi
done
exit $status
