#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# One checked call per vtable slot (docs/backend-abi.md, core/dispatch.h):
#   1. no core source other than core/dispatch.c and core/dispatch.h (the
#      hot slots' inline common case) calls through a backend's table
#      (`->vt->`, or a call through a variable named `vt`);
#   2. core/dispatch.c or core/dispatch.h defines adr__dispatch_<slot> for
#      every function slot of struct adr_backend in include/adr/backend.h.
# Usage: check_dispatch.sh [--self-test] CORE_DIR BACKEND_H. Exit 0 clean,
# 1 with the offending lines (or missing functions) on stderr.
# --self-test: the check must pass on CORE_DIR and fail on copies of it with
# a direct slot call added to one file (`->vt->`, then through `vt`), and
# with one dispatch function renamed.
if [ "$1" = "--self-test" ]; then
  shift
  self=$0
  sh "$self" "$1" "$2" >/dev/null || { echo "self-test: the clean tree fails" >&2; exit 1; }
  tmp=$(mktemp -d) || exit 1
  trap 'rm -rf "$tmp"' EXIT
  for variant in arrow var rename; do
    rm -rf "$tmp/core"
    cp -R "$1" "$tmp/core"
    case $variant in
      arrow) printf 'int f(struct adr_device* d) { return d->vt->event_query(d->handle, 0, 0); }\n' \
               >>"$tmp/core/sync.c" ;;
      var) printf 'int g(const struct adr_backend* vt) { return vt->init(0); }\n' \
             >>"$tmp/core/loader.c" ;;
      rename) sed 's/adr__dispatch_host_unregister(/adr__dispatch_host_unreg(/' "$1/dispatch.c" \
                >"$tmp/core/dispatch.c" ;;
    esac
    if sh "$self" "$tmp/core" "$2" 2>"$tmp/err" >/dev/null; then
      echo "self-test: the check passed with a violation ($variant)" >&2
      exit 1
    fi
    case $variant in
      arrow) want='sync.c:' ;;
      var) want='loader.c:' ;;
      rename) want='no adr__dispatch_host_unregister' ;;
    esac
    if ! grep -q "$want" "$tmp/err"; then
      echo "self-test: the failure ($variant) does not name '$want':" >&2
      cat "$tmp/err" >&2
      exit 1
    fi
  done
  echo "self-test: clean tree passes; direct calls (->vt->, vt->) and a missing function fail"
  exit 0
fi
core=$1
header=$2
if [ ! -d "$core" ] || [ ! -f "$header" ]; then
  echo "usage: $0 CORE_DIR BACKEND_H" >&2
  exit 1
fi
status=0

files=$(find "$core" -type f \( -name '*.c' -o -name '*.h' \) | sort)
if [ -z "$files" ]; then
  echo "check_dispatch: no C sources under $core" >&2
  exit 1
fi
for f in $files; do
  [ "$f" = "$core/dispatch.c" ] && continue
  [ "$f" = "$core/dispatch.h" ] && continue
  hits=$(grep -nE -e '->[[:space:]]*vt[[:space:]]*->' \
    -e '(^|[^[:alnum:]_>.)])vt[[:space:]]*->[[:space:]]*[[:alnum:]_]+[[:space:]]*\(' "$f")
  if [ -n "$hits" ]; then
    echo "$hits" | sed "s|^|$f:|" >&2
    status=1
  fi
done
if [ "$status" -ne 0 ]; then
  echo "check_dispatch: the lines above call a backend slot directly; call the" \
    "slot's function in core/dispatch.c instead" >&2
fi

dispatch=$core/dispatch.c
if [ -f "$dispatch" ]; then
  slots=$(awk '/^struct adr_backend \{/ { inside = 1; next }
               inside && /^\};/ { exit }
               inside' "$header" | grep -oE '\(\*[a-z_]+\)\(' | sed 's/[(*)]//g')
  if [ -z "$slots" ]; then
    echo "check_dispatch: no slots found in $header" >&2
    exit 1
  fi
  n=0
  for s in $slots; do
    n=$((n + 1))
    # a definition in dispatch.c, or an inline one in dispatch.h
    if ! grep -qE "^[a-z].*[ *]adr__dispatch_${s}\(" "$dispatch" &&
      ! grep -qE "^static inline .*[ *]adr__dispatch_${s}\(" "$core/dispatch.h"; then
      echo "check_dispatch: $dispatch has no adr__dispatch_$s" >&2
      status=1
    fi
  done
  [ "$status" -eq 0 ] && echo "check_dispatch: $n slots, one function each; no other core file calls a slot"
elif [ "$status" -eq 0 ]; then
  echo "check_dispatch: no $dispatch" >&2
  status=1
fi
exit $status
