#!/usr/bin/env python3
"""Runs the `gpu` suite of a build tree on a machine with a real GPU.

The build tree is made on the development machine (Debian, with cmocka) and
copied to the GPU machine, where neither meson nor cmocka need be installed
and the checkout may live at another path. This script:

  * reads the tests from `<build>/gpu-tests.json` (written on the build
    machine by `scripts/gpu_check.py --export <build>`, from
    `meson introspect --tests`),
  * rewrites the build machine's source root to this checkout's root,
  * puts `<build>/gpu-libs` (a copy of libcmocka.so.0) on LD_LIBRARY_PATH,
  * runs every test of the `gpu` suite, then the conformance, array and
    memory tests again on the CUDA backend's other device types and
    configurations (pinned host, managed, small staging chunks, no pool,
    host memory as the NULL device without the cpu backend),
    each with ADR_CONFORMANCE_REQUIRE=1 / ADR_CUDA_TEST_REQUIRE=1 so that a
    missing device is a failure, not a skip,
  * prints one line per run and a summary; writes each log under $OUT (or
    --out) when given.

Exit status: 0 when every run passed, 1 otherwise.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

# Extra runs: (suffix, environment added to every gpu test of that kind).
EXTRA = [
    ("host", {"ADR_DEVICE": "cuda_host:0"}),
    ("managed", {"ADR_DEVICE": "cuda_managed:0"}),
    ("staged", {"ADR_CUDA_STAGING": "4K:8K"}),
    ("nopool", {"ADR_ALLOC": "backend"}),
    # Host memory as the NULL device, with no cpu backend loaded.
    ("hostnull", {"ADR_CONFORMANCE_HOST": "null", "ADR_ARRAY_HOST": "null",
                  "ADR_BACKENDS": "cuda"}),
]


def export(build):
    """On the build machine: write gpu-tests.json and gpu-libs/."""
    out = subprocess.run(["meson", "introspect", build, "--tests"], check=True,
                         capture_output=True, text=True).stdout
    tests = [t for t in json.loads(out) if any(s.endswith("gpu") for s in t["suite"])]
    root = os.path.dirname(os.path.abspath(build.rstrip("/")))
    with open(os.path.join(build, "gpu-tests.json"), "w") as f:
        json.dump({"root": root, "tests": tests}, f, indent=1)
    libs = os.path.join(build, "gpu-libs")
    os.makedirs(libs, exist_ok=True)
    for cand in ("/usr/lib/x86_64-linux-gnu/libcmocka.so.0", "/lib/x86_64-linux-gnu/libcmocka.so.0"):
        if os.path.exists(cand):
            shutil.copy(os.path.realpath(cand), os.path.join(libs, "libcmocka.so.0"))
            break
    else:
        sys.exit("gpu_check: libcmocka.so.0 not found on this machine")
    print(f"gpu_check: {len(tests)} gpu tests written to {build}/gpu-tests.json")


def runs(build, data, configs):
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    old = data["root"]

    def fix(s):
        return s.replace(old, here)

    libs = os.path.join(here, os.path.basename(build.rstrip("/")), "gpu-libs")
    for t in data["tests"]:
        cmd = [fix(c) for c in t["cmd"]]
        env = {k: fix(v) for k, v in t["env"].items()}
        env["LD_LIBRARY_PATH"] = env.get("LD_LIBRARY_PATH", "") + ":" + libs
        env["ADR_CONFORMANCE_REQUIRE"] = "1"
        env["ADR_CUDA_TEST_REQUIRE"] = "1"
        yield t["name"], cmd, env, t["timeout"]
        # The other device types and configurations, for the suites that
        # take their device from ADR_DEVICE.
        if "ADR_DEVICE" in env and "peer" not in t["name"]:
            for suffix, extra in EXTRA:
                if configs is not None and suffix not in configs:
                    continue
                e = dict(env)
                e.update(extra)
                yield f"{t['name']}-{suffix}", cmd, e, t["timeout"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build", help="build directory (e.g. build-gpu)")
    ap.add_argument("--export", action="store_true", help="write the test list (build machine)")
    ap.add_argument("--out", default=os.environ.get("OUT"), help="directory for the logs")
    ap.add_argument("--timeout", type=float, default=None, help="seconds per run (default: meson's)")
    ap.add_argument("--configs", default=None,
                    help="comma-separated extra configurations to run (default: all of "
                    + ", ".join(e[0] for e in EXTRA) + ")")
    ap.add_argument("--match", default=None, help="run only tests whose name contains this")
    args = ap.parse_args()
    if args.export:
        export(args.build)
        return 0
    with open(os.path.join(args.build, "gpu-tests.json")) as f:
        data = json.load(f)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    results = []
    configs = None if args.configs is None else set(args.configs.split(","))
    for name, cmd, env, timeout in runs(args.build, data, configs):
        if args.match is not None and args.match not in name:
            continue
        full_env = dict(os.environ)
        full_env.update(env)
        start = time.monotonic()
        try:
            p = subprocess.run(cmd, env=full_env, capture_output=True, text=True,
                               timeout=args.timeout or timeout)
            rc, log = p.returncode, p.stdout + p.stderr
        except subprocess.TimeoutExpired as e:
            def text(b):
                return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")
            rc, log = "TIMEOUT", text(e.stdout) + text(e.stderr)
        took = time.monotonic() - start
        verdict = "OK" if rc == 0 else ("SKIP" if rc == 77 else "FAIL")
        results.append((name, verdict, rc, took))
        print(f"{verdict:4} {name:45} rc={rc} {took:6.1f} s", flush=True)
        if verdict != "OK":
            print("\n".join(log.splitlines()[-40:]), flush=True)
        if args.out:
            with open(os.path.join(args.out, "gpu-logs.txt"), "a") as f:
                f.write(f"==== {name} rc={rc} {took:.1f} s\n{log}\n")
    counts = {v: sum(1 for r in results if r[1] == v) for v in ("OK", "SKIP", "FAIL")}
    print(f"gpu_check: {counts['OK']} OK, {counts['SKIP']} SKIP, {counts['FAIL']} FAIL")
    return 0 if counts["FAIL"] == 0 and counts["SKIP"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
