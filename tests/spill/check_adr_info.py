#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""adr-info --memory shows the spill statistics of its own process
(docs/spill.md, "adr-info"; docs/adr-info-json.md, process.spill): the text
report prints them as adr_spill_stats_format does, with the exposures at
level 2; the JSON report has process.spill, null with spilling off and an
error object for a malformed variable."""
import json
import os
import subprocess
import sys

info = sys.argv[1]
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def run(args, extra):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("ADR_SPILL"):
            del env[k]
    env.update({"ADR_BACKENDS": "cpu"})
    env.update(extra)
    p = subprocess.run([info] + args, env=env, capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


TRIGGERS = {"on_demand", "limit", "explicit"}
KEYS = {"level", "device_limit", "spilled", "unspilled", "buffers", "device_bytes", "host_bytes",
        "spillable_bytes", "exposed_buffers", "exposed_bytes", "peak_device_bytes",
        "limit_exceeded", "spill_failures", "unspill_failures", "queued_spills", "cow_copies",
        "cow_bytes", "exposures"}

on = {"ADR_SPILL": "on", "ADR_SPILL_STATS": "2", "ADR_SPILL_DEVICE_LIMIT": "1GiB"}
rc, out, err = run(["--memory"], on)
check(rc == 0, f"--memory with ADR_SPILL=on: exit {rc} ({err.strip()})")
for text in ("spill                  on (ADR_SPILL), limit 1.0 GiB",
             "adr_spill_stats_format", "Spill Statistics (level=2):",
             "gpu => cpu: 0 B in 0.0000s (on demand 0 B, limit 0 B, explicit 0 B)",
             "cpu => gpu: 0 B", "background: 0 spills queued; copy-on-write: 0 copies",
             "Exposed buffers (level >= 2): 0 records"):
    check(text in out, f"text report: {text!r} missing")

rc, out, err = run(["--memory", "--json"], on)
check(rc == 0, f"--memory --json: exit {rc}")
doc = json.loads(out)
for d in doc["devices"]:
    sp = d["memory"]["process"].get("spill")
    check(isinstance(sp, dict) and set(sp) == KEYS, f"{d['device']}: spill keys {sp}")
    if isinstance(sp, dict):
        check(sp["level"] == 2 and sp["device_limit"] == 1 << 30, f"{d['device']}: level, limit")
        check(set(sp["spilled"]) == TRIGGERS, f"{d['device']}: triggers")
        check(all(set(v) == {"count", "bytes", "nanoseconds"}
                  for v in list(sp["spilled"].values()) + [sp["unspilled"]]),
              f"{d['device']}: transfer keys")
        check(sp["exposures"] == [], f"{d['device']}: exposures at level 2")

rc, out, err = run(["--memory", "--json"], {"ADR_SPILL": "on"})
doc = json.loads(out)
check(all(d["memory"]["process"]["spill"]["exposures"] is None for d in doc["devices"]),
      "exposures null below level 2")

rc, out, err = run(["--memory", "--json"], {})
doc = json.loads(out)
check(all(d["memory"]["process"]["spill"] is None for d in doc["devices"]),
      "spill null with spilling off")
rc, out, err = run(["--memory"], {})
check(" spill " not in out, "no spill line with spilling off")

rc, out, err = run(["--memory", "--json"], {"ADR_SPILL": "on", "ADR_SPILL_STATS": "7"})
doc = json.loads(out)
for d in doc["devices"]:
    sp = d["memory"]["process"]["spill"]
    check(set(sp) == {"error"} and "ADR_SPILL_STATS" in sp["error"], f"malformed: {sp}")

for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
