#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# adr-ipc from the outside: a file written by the tool is read back by
# info, cat (plain and through DEVICE, byte for byte the same) and
# to-device; pipes; dictionary deltas written by cat and shown by info; a
# cut file and bad usage fail with the right status.
#   check_tool.sh ADR_IPC DEVICE DICT_STREAM
set -u
tool=$1
dev=$2
dict_stream=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { # description, then the command
  what=$1
  shift
  if "$@" >"$tmp/out" 2>"$tmp/err"; then
    echo "ok: $what"
  else
    echo "FAIL: $what"; cat "$tmp/out" "$tmp/err"
    fails=$((fails + 1))
  fi
}

check "sample writes 3 batches" "$tool" sample --batches 3 5000 "$tmp/a.arrows"
check "info reads the file back" sh -c "'$tool' info '$tmp/a.arrows' | grep -q '^3 batches, 5000 rows'"
check "info lists the schema" sh -c "'$tool' info '$tmp/a.arrows' | grep -q 'tags: list (\"+l\"), nullable'"
check "cat file to file is byte-exact" sh -c "'$tool' cat '$tmp/a.arrows' '$tmp/b.arrows' && cmp '$tmp/a.arrows' '$tmp/b.arrows'"
check "cat through a pipe is byte-exact" sh -c "'$tool' sample -b 2 777 | '$tool' cat | '$tool' cat - '$tmp/p.arrows' && '$tool' sample -b 2 777 '$tmp/q.arrows' && cmp '$tmp/p.arrows' '$tmp/q.arrows'"
check "cat --device $dev is byte-exact" sh -c "'$tool' cat --device '$dev' '$tmp/a.arrows' '$tmp/c.arrows' && cmp '$tmp/a.arrows' '$tmp/c.arrows'"
check "to-device $dev verifies every batch" sh -c "'$tool' to-device '$dev' '$tmp/a.arrows' | grep -q '^3 batches, 5000 rows, .* all verified'"
check "an empty table" sh -c "'$tool' sample 0 '$tmp/e.arrows' && '$tool' info '$tmp/e.arrows' | grep -q '^1 batches, 0 rows'"

# A dictionary that grows over 3 batches (2, 4, 6 words): replacements as
# written; cat -D turns the last two into deltas of 2 words, through the
# device too; reading the deltas back gives the replacements byte for byte.
check "a stream with a growing dictionary" "$dict_stream" "$tmp/g.arrows"
check "info: 3 replacements, no delta" sh -c "'$tool' info '$tmp/g.arrows' >'$tmp/gi' && [ \$(grep -c ': dictionary batch, id 0' '$tmp/gi') -eq 3 ] && ! grep -q delta '$tmp/gi'"
check "cat --dictionary-deltas writes 2 deltas" sh -c "'$tool' cat --dictionary-deltas '$tmp/g.arrows' '$tmp/d.arrows' && '$tool' info '$tmp/d.arrows' >'$tmp/di' && grep -q 'message 1: dictionary batch, id 0, 2 values' '$tmp/di' && [ \$(grep -c 'delta dictionary batch, id 0, 2 values appended' '$tmp/di') -eq 2 ] && grep -q '^3 batches, 15 rows' '$tmp/di'"
check "cat -D --device $dev is byte-exact with cat -D" sh -c "'$tool' cat -D --device '$dev' '$tmp/g.arrows' '$tmp/dd.arrows' && cmp '$tmp/d.arrows' '$tmp/dd.arrows'"
check "cat of the deltas writes the replacements again" sh -c "'$tool' cat '$tmp/d.arrows' '$tmp/r.arrows' && cmp '$tmp/g.arrows' '$tmp/r.arrows'"
check "cat -D of the deltas is byte-exact" sh -c "'$tool' cat -D '$tmp/d.arrows' '$tmp/d2.arrows' && cmp '$tmp/d.arrows' '$tmp/d2.arrows'"

head -c 3000 "$tmp/a.arrows" >"$tmp/cut.arrows"
"$tool" info "$tmp/cut.arrows" >/dev/null 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] && grep -q "message 1" "$tmp/err"; then echo "ok: a cut file: exit 1, message index"; else
  echo "FAIL: a cut file: rc $rc"; cat "$tmp/err"; fails=$((fails + 1)); fi
"$tool" cat "$tmp/cut.arrows" "$tmp/x.arrows" 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] && grep -q "truncated" "$tmp/err"; then echo "ok: cat of a cut file: exit 1, truncated"; else
  echo "FAIL: cat of a cut file: rc $rc"; cat "$tmp/err"; fails=$((fails + 1)); fi
printf 'not an arrow stream' | "$tool" info >/dev/null 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] && grep -q "continuation" "$tmp/err"; then echo "ok: garbage: exit 1, continuation"; else
  echo "FAIL: garbage: rc $rc"; cat "$tmp/err"; fails=$((fails + 1)); fi
for bad in "" "frobnicate" "cat a b c" "to-device" "sample x" "info --device cpu" "info -D"; do
  # shellcheck disable=SC2086
  "$tool" $bad >/dev/null 2>&1
  rc=$?
  if [ $rc -eq 2 ]; then echo "ok: usage error '$bad': exit 2"; else
    echo "FAIL: usage error '$bad': rc $rc"; fails=$((fails + 1)); fi
done
check "--help" sh -c "'$tool' --help | grep -q '^usage: adr-ipc'"
check "--version" sh -c "'$tool' --version | grep -q '^adr-ipc (adr) '"
for opt in --device --dictionary-deltas --batches --help --version; do
  check "adr-ipc.1 names $opt" grep -q -- "$(echo "$opt" | sed 's/-/\\\\-/g')" "$(dirname "$0")/../../man/adr-ipc.1"
done
echo "$fails failed"
[ "$fails" -eq 0 ]
