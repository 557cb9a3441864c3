#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# adr in an elevated process: a setuid-root copy of elevated_probe run as an
# unprivileged user (uid/gid 65534) must not let its caller
#   (a) append to a root-owned file or create one through ADR_LOG=...,file=
#       (under umask 000),
#   (b) run a library through the OpenCL ICD loader (OCL_ICD_VENDORS naming
#       a directory with a planted .icd): the opencl backend is not loaded
#       and is reported excluded with the reason,
#   (d) have ADR_PLUGIN_PATH, ADR_OPENCL_LIBRARY, ADR_CUDA_DRIVER,
#       ADR_HIP_LIBRARY or ADR_VULKAN_VALIDATION honoured (each ignored with
#       a warning),
#   (e) have ADR_UCX_WIREUP or ADR_UCX_FORCE_BOUNCE honoured by the UCX
#       module (when it is built: ADR_TEST_UCX_PROBE, _MODULE and
#       ADR_TEST_LIBADR name a probe linked with the shared libadr, the
#       module and libadr, laid out as installed): with both set, an
#       elevated sender still connects to a listener of the default wire-up
#       and sends host memory in place,
# while (c) the application's adr_backend_allow_elevated("opencl") does load
# the opencl backend (PoCL). Every check has a control run, the same program
# and environment as root without elevation, where the file IS written and
# the planted library IS opened, so the test fails if the protection goes.
#
#   test_elevated.sh PROBE FAKE_LIBRARY BACKEND_MODULE...
#
# Needs root (to make a setuid-root copy); otherwise exits 77 saying so.
set -u

probe=$1
fake=$2
shift 2
modules=("$@")

if [ "$(id -u)" != 0 ]; then
  echo "SKIP: making a setuid-root copy of the test program needs root (running as uid $(id -u))"
  exit 77
fi

failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
pass() {
  echo "ok: $*"
}

# As the unprivileged user, keeping the environment.
if command -v setpriv >/dev/null; then
  as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
elif command -v runuser >/dev/null; then
  as_user=(runuser -u "$(getent passwd 65534 | cut -d: -f1)" --)
else
  echo "FAIL: neither setpriv nor runuser is installed (util-linux)"
  exit 1
fi

# A fresh directory every user can traverse, on a file system that honours
# the setuid bit (the build tree may be under /root, or mounted nosuid).
work=""
for base in "${TMPDIR:-/tmp}" /tmp /var/tmp; do
  w=$(mktemp -d "$base/adr-elevated.XXXXXX" 2>/dev/null) || continue
  chmod 755 "$w"
  mkdir -p "$w/bin/adr/backends"
  cp "$probe" "$w/bin/probe"
  chown root:root "$w/bin/probe"
  chmod 4755 "$w/bin/probe"
  if "${as_user[@]}" "$w/bin/probe" 2>/dev/null | grep -q '^elevated 1 uid 65534 euid 0$'; then
    work=$w
    break
  fi
  rm -rf "$w"
done
if [ -z "$work" ]; then
  echo "FAIL: running as root, but no directory (\$TMPDIR, /tmp, /var/tmp) gives a setuid-root"
  echo "      program elevation (mounted nosuid? no_new_privs set on this process?)"
  exit 1
fi
trap 'rm -rf "$work"' EXIT
echo "work directory: $work"

for m in "${modules[@]}"; do cp "$m" "$work/bin/adr/backends/"; done
chmod 755 "$work/bin/adr" "$work/bin/adr/backends"
chmod 644 "$work"/bin/adr/backends/*

# Root-owned directory the user cannot write, with a root-owned file.
mkdir "$work/root"
chmod 755 "$work/root"
printf 'original line\n' >"$work/root/existing.log"
chmod 644 "$work/root/existing.log"
cp "$work/root/existing.log" "$work/existing.orig"

# The attacker's library, under one name per way in; the planted .icd.
mkdir "$work/fake" "$work/vendors" "$work/markers" "$work/plugins"
for n in icd opencl cuda hip; do cp "$fake" "$work/fake/libfake_$n.so"; done
cp "$fake" "$work/plugins/libadr_evil.so"
chmod 755 "$work"/fake/*.so "$work"/plugins/*.so
echo "$work/fake/libfake_icd.so" >"$work/vendors/evil.icd"
chmod 644 "$work/vendors/evil.icd"

have_backend() { [ -f "$work/bin/adr/backends/libadr_$1.so" ]; }

# run NAME elevated|plain ARGS...: the probe under umask 000 with the
# variables in the array envs.
envs=()
run() {
  local name=$1 mode=$2
  shift 2
  local who=() extra=()
  if [ "$mode" = elevated ]; then
    who=("${as_user[@]}")
    # Leak checking stops the threads with ptrace, which the kernel may
    # refuse in a process that changed its user; the plain runs check leaks.
    extra=(ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" ADR_VULKAN_VALIDATION=fatal)
  fi
  (umask 000; env "${envs[@]}" "${extra[@]}" "${who[@]}" "$work/bin/${probe_bin:-probe}" "$@" >"$work/$name.out" 2>"$work/$name.err")
  local st=$?
  sed "s/^/  $name: /" "$work/$name.out" "$work/$name.err"
  [ $st = 0 ] || fail "$name: the probe exited with status $st"
}

expect_line() { # NAME REGEX WHAT
  if grep -Eq -- "$2" "$work/$1.out" "$work/$1.err"; then pass "$1: $3"; else fail "$1: $3 (no line matches '$2')"; fi
}
expect_no_line() {
  if grep -Eq -- "$2" "$work/$1.out" "$work/$1.err"; then fail "$1: $3 (a line matches '$2')"; else pass "$1: $3"; fi
}

hostile_env=(ADR_TEST_MARKER_DIR="$work/markers" ADR_PLUGIN_PATH="$work/plugins"
             ADR_OPENCL_LIBRARY="$work/fake/libfake_opencl.so"
             ADR_CUDA_DRIVER="$work/fake/libfake_cuda.so"
             ADR_HIP_LIBRARY="$work/fake/libfake_hip.so")
# ADR_VULKAN_VALIDATION (a layer to load) is added to the elevated runs
# only: honoured, it would make the control runs depend on the layer.
unset ADR_LOG ADR_DEVICE ADR_BACKENDS ADR_ALLOC OCL_ICD_VENDORS OPENCL_VENDOR_PATH

echo "== (a) ADR_LOG file=, (b) OCL_ICD_VENDORS: control run as root, not elevated"
envs=(ADR_LOG="info,file=$work/root/existing.log" OCL_ICD_VENDORS="$work/vendors"
      ADR_TEST_MARKER_DIR="$work/markers")
run plain-a plain
expect_line plain-a '^elevated 0 ' "not elevated"
if cmp -s "$work/root/existing.log" "$work/existing.orig"; then
  fail "plain-a: ADR_LOG file= did not append to the log file, so the elevated check below proves nothing"
else
  pass "plain-a: ADR_LOG file= appended to the root-owned file"
fi
cp "$work/existing.orig" "$work/root/existing.log"
icd_control=0
if have_backend opencl; then
  if [ -e "$work/markers/libfake_icd.so.opened" ]; then
    pass "plain-a: the ICD loader opened the planted library (OCL_ICD_VENDORS honoured)"
    icd_control=1
  else
    fail "plain-a: the planted .icd was not opened without elevation, so (b) would prove nothing"
  fi
  rm -f "$work"/markers/*
else
  echo "note: the opencl backend is not built: (b) and (c) are not checked"
fi

echo "== (a) ADR_LOG file= new file, (d) library variables: control run as root"
envs=(ADR_LOG="info,file=$work/root/new.log" "${hostile_env[@]}")
run plain-d plain
if [ -e "$work/root/new.log" ]; then
  pass "plain-d: ADR_LOG file= created $(stat -c '%A %U' "$work/root/new.log") $work/root/new.log"
else
  fail "plain-d: ADR_LOG file= created no file without elevation"
fi
rm -f "$work/root/new.log"
for n in opencl cuda hip; do
  if have_backend "$n"; then
    if [ -e "$work/markers/libfake_$n.so.opened" ]; then
      pass "plain-d: the $n backend opened the library its variable names"
    else
      fail "plain-d: the $n backend did not open the library its variable names"
    fi
  fi
done
if [ -e "$work/markers/libadr_evil.so.opened" ]; then
  pass "plain-d: the library in ADR_PLUGIN_PATH was opened"
else
  fail "plain-d: the library in ADR_PLUGIN_PATH was not opened without elevation"
fi
rm -f "$work"/markers/*

echo "== elevated, no opt-in: (a) and (b)"
envs=(ADR_LOG="info,file=$work/root/existing.log" OCL_ICD_VENDORS="$work/vendors"
      "${hostile_env[@]}")
run elevated-ab elevated --late-allow opencl --late-allow cpu
expect_line elevated-ab '^elevated 1 uid 65534 euid 0$' "elevated (AT_SECURE), uid 65534, euid 0"
if cmp -s "$work/root/existing.log" "$work/existing.orig"; then
  pass "elevated-ab: the root-owned log file is unchanged"
else
  fail "elevated-ab: ADR_LOG file= appended to a root-owned file: $(tail -n 2 "$work/root/existing.log")"
fi
expect_line elevated-ab "ADR_LOG file=$work/root/existing.log ignored: the process runs with elevated privileges" \
  "ADR_LOG file= ignored with a warning"
expect_line elevated-ab '^adr: info: ' "the ADR_LOG level still applies (info lines on stderr)"
expect_line elevated-ab 'ADR_PLUGIN_PATH ignored: the process runs with elevated privileges' \
  "ADR_PLUGIN_PATH ignored with a warning"
expect_no_line elevated-ab '^backend evil ' "no backend from ADR_PLUGIN_PATH"
expect_line elevated-ab '^backend cpu loaded ' "cpu loads"
for n in opencl cuda hip; do
  have_backend "$n" || continue
  expect_line elevated-ab "^backend $n excluded 0 devices: not loaded in an elevated process: .*; opt in with adr_backend_allow_elevated\\(\"$n\"\\)$" \
    "$n reported excluded with the reason"
done
expect_line elevated-ab '^late-allow opencl EBUSY: \[adr_backend_allow_elevated\] backend .opencl. was already needed' \
  "opting in after the backend was needed is EBUSY"
expect_line elevated-ab '^late-allow cpu OK$' "cpu needs no opt-in"
if have_backend vulkan && grep -q '^backend vulkan loaded ' "$work/plain-d.out"; then
  expect_line elevated-ab '^backend vulkan loaded ' "vulkan loads (its loader protects itself)"
  expect_line elevated-ab 'ADR_VULKAN_VALIDATION ignored: the process runs with elevated privileges' \
    "ADR_VULKAN_VALIDATION ignored with a warning"
fi
markers=$(ls "$work/markers")
if [ -z "$markers" ]; then
  pass "elevated-ab: no planted library was opened"
else
  fail "elevated-ab: planted libraries were opened: $markers"
fi

echo "== elevated, opt-in: (a) new file, (c) opencl loads, (d) library variables"
envs=(ADR_LOG="info,file=$work/root/new.log" "${hostile_env[@]}")
run elevated-cd elevated --allow opencl --allow cuda --allow hip --late-allow hip
if [ -e "$work/root/new.log" ]; then
  fail "elevated-cd: ADR_LOG file= created $(stat -c '%A %U' "$work/root/new.log") $work/root/new.log"
else
  pass "elevated-cd: ADR_LOG file= created nothing"
fi
expect_line elevated-cd '^allow opencl OK$' "adr_backend_allow_elevated(\"opencl\") before any use is OK"
expect_line elevated-cd '^late-allow hip OK$' "a second opt-in is OK"
for v in ADR_OPENCL_LIBRARY:opencl ADR_CUDA_DRIVER:cuda ADR_HIP_LIBRARY:hip; do
  have_backend "${v#*:}" || continue
  expect_line elevated-cd "${v%%:*} ignored: the process runs with elevated privileges" \
    "${v%%:*} ignored with a warning"
done
if [ $icd_control = 1 ]; then
  envs=(ADR_BACKENDS=opencl)
  run plain-c plain
  if grep -q '^backend opencl loaded [1-9]' "$work/plain-c.out"; then
    expect_line elevated-cd '^backend opencl loaded [1-9][0-9]* devices' \
      "with the opt-in the opencl backend loads (PoCL) in the elevated process"
  else
    echo "note: the opencl backend has no device here even without elevation: (c) is not checked"
  fi
fi
markers=$(ls "$work/markers")
if [ -z "$markers" ]; then
  pass "elevated-cd: no library named by a variable was opened"
else
  fail "elevated-cd: libraries named by variables were opened: $markers"
fi

if [ -n "${ADR_TEST_UCX_PROBE:-}" ]; then
  # An installation: <work>/lib/libadr.so.0 and its module directory; the
  # probe's run path names it (absolute: honoured in an elevated process).
  mkdir -p "$work/lib/adr/modules" "$work/lib/adr/backends"
  cp -L "$ADR_TEST_LIBADR" "$work/lib/libadr.so.0"
  cp "$ADR_TEST_UCX_MODULE" "$work/lib/adr/modules/"
  cp "$work"/bin/adr/backends/* "$work/lib/adr/backends/"
  chmod 755 "$work/lib" "$work/lib/adr" "$work/lib/adr/modules" "$work/lib/adr/backends"
  chmod 644 "$work/lib/libadr.so.0" "$work/lib/adr/modules/"* "$work/lib/adr/backends/"*
  cp "$ADR_TEST_UCX_PROBE" "$work/bin/ucx-probe"
  if ! patchelf --set-rpath "$work/lib" "$work/bin/ucx-probe"; then
    fail "(e): patchelf could not set the probe's run path (scripts/deps.sh installs patchelf)"
  fi
  chown root:root "$work/bin/ucx-probe"
  chmod 4755 "$work/bin/ucx-probe"
  # ucx NAME elevated|plain: a root listener of the default wire-up in the
  # background, then the probe sending to it with the variables in envs.
  ucx() {
    rm -f "$work/port"
    (env -u ADR_UCX_WIREUP -u ADR_UCX_FORCE_BOUNCE UCX_TLS=tcp "$work/bin/ucx-probe" \
      --ucx-listen "$work/port" >"$work/$1-listener.out" 2>&1) &
    local listener=$! i
    for i in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
    if [ ! -s "$work/port" ]; then
      fail "$1: the UCX listener did not start: $(cat "$work/$1-listener.out")"
      kill $listener 2>/dev/null
      return
    fi
    envs+=(UCX_TLS=tcp)
    probe_bin=ucx-probe run "$1" "$2" --ucx-send "$(cat "$work/port")"
    wait $listener
    sed "s/^/  $1 listener: /" "$work/$1-listener.out"
  }
  echo "== (e) UCX variables: control runs as root"
  envs=(ADR_UCX_FORCE_BOUNCE=1)
  ucx plain-e-bounce plain
  expect_line plain-e-bounce '^ucx-send OK direct 0 bounced 1048576$' \
    "ADR_UCX_FORCE_BOUNCE=1 sends host memory through the bounce buffer"
  envs=(ADR_UCX_WIREUP=sockaddr)
  ucx plain-e-wireup plain
  expect_line plain-e-wireup '^ucx-send ERR: ' \
    "ADR_UCX_WIREUP=sockaddr cannot connect to a listener of the default wire-up"
  echo "== (e) elevated"
  envs=(ADR_UCX_FORCE_BOUNCE=1 ADR_UCX_WIREUP=sockaddr)
  ucx elevated-e elevated
  expect_line elevated-e '^elevated 1 uid 65534 euid 0$' "elevated (AT_SECURE), uid 65534, euid 0"
  expect_line elevated-e '^ucx-send OK direct 1048576 bounced 0$' \
    "ADR_UCX_WIREUP and ADR_UCX_FORCE_BOUNCE ignored: connected, host memory sent in place"
  expect_line elevated-e-listener '^ucx-received 131072 rows$' "the listener received the batch"
else
  echo "note: the UCX module is not built: (e) is not checked"
fi

if [ $failures -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all checks passed"
