#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Behaviour of the installed tools and of the environment, from the outside.

    check_tools.py CASE ADR_INFO ADR_DEMO ADR_BENCH [SOURCE_ROOT]

Each CASE is one meson test (tests/packaging/meson.build); every check
prints "ok:" or "FAIL:" and the case exits 1 when any failed.
"""
import json
import os
import re
import subprocess
import sys

failures = 0


def check(cond, what):
    global failures
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        failures += 1
    return cond


def run(argv, env=None, timeout=120):
    e = dict(os.environ)
    for k in ("ADR_DEVICE", "ADR_BACKENDS", "ADR_LOG", "ADR_ALLOC"):
        e.pop(k, None)
    e.update(env or {})
    p = subprocess.run(argv, env=e, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def case_options(info, demo, bench, _src):
    """getopt_long in every tool: --help, --version, unknown options."""
    for tool, name in ((info, "adr-info"), (demo, "adr-demo"), (bench, "adr-bench")):
        for h in ("--help", "-h"):
            rc, out, err = run([tool, h])
            check(rc == 0 and out.startswith("usage: " + name), f"{name} {h}: usage, exit 0")
            # --help runs nothing else: no demo round trip, no bench rows, no report.
            check("round trip:" not in out and "load average" not in out and "backends:" not in out,
                  f"{name} {h} runs nothing else")
        for v in ("--version", "-V"):
            rc, out, _ = run([tool, v])
            check(rc == 0 and re.fullmatch(re.escape(name) + r" \(adr\) \d+\.\d+\.\d+\n", out),
                  f"{name} {v}: '{out.strip()}'")
        for bad in ("--no-such-option", "-Z"):
            rc, out, err = run([tool, bad])
            check(rc == 2 and "usage: " + name in err and out == "",
                  f"{name} {bad}: usage on stderr, exit 2 (rc {rc})")
        rc, out, err = run([tool, "--no-such-option", "--help"])
        check(rc == 2 and out == "", f"{name} --no-such-option --help: exit 2 (rc {rc})")
    for tool, name in ((info, "adr-info"), (demo, "adr-demo")):
        rc, _, err = run([tool, "stray"])
        check(rc == 2 and "usage" in err, f"{name} stray argument: exit 2")
    rc, _, err = run([bench, "--quick", "no-such-area"])
    check(rc == 2 and "no-such-area" in err, "adr-bench unknown area: exit 2")
    rc, out, _ = run([bench, "--list"])
    check(rc == 0 and "core" in out.split() and "selftest" in out.split(), "adr-bench --list")
    rc, _, err = run([info, "--list", "--json"])
    check(rc == 2, "adr-info --list --json: exit 2")
    rc, out, _ = run([demo, "--device", "cpu"])
    check(rc == 0 and "device: cpu:0" in out and "table round trip" in out,
          "adr-demo --device cpu runs the demo on cpu:0")
    rc, out, err = run([demo, "-d", "cpu:x"])
    check(rc == 1 and "ADR_DEVICE" in err, "adr-demo -d cpu:x: ADR_DEVICE error, exit 1")


KIND_OF_TYPE = {"cpu": "cpu", "cuda": "gpu", "cuda_managed": "gpu", "cuda_host": "cpu",
                "hip": "gpu", "hip_host": "cpu"}


def case_list_sim(info, demo, bench, src):
    """--list with the CUDA and HIP simulators: every type of both backends."""
    rc, out, _ = run([info, "--list"])
    spellings = [l.split()[0] for l in out.splitlines()]
    for want in ("cuda:0", "cuda_host:0", "cuda_managed:0", "hip:0", "hip_host:0"):
        check(want in spellings, f"{want} is listed")
    case_list(info, demo, bench, src)


def case_list(info, _demo, _bench, _src):
    """--list: one line per device, its ADR_DEVICE spelling, kind and name."""
    rc, out, err = run([info, "--list"])
    check(rc == 0, f"adr-info --list exits 0 ({err.strip()})")
    rc2, out2, _ = run([info, "-l"])
    check(rc2 == 0 and out2 == out, "-l is --list")
    rc, js, _ = run([info, "--json"])
    doc = json.loads(js)
    lines = out.splitlines()
    check(len(lines) == len(doc["devices"]) and len(lines) >= 1,
          f"{len(lines)} lines for {len(doc['devices'])} devices")
    for line, dev in zip(lines, doc["devices"]):
        parts = line.split(None, 2)
        check(len(parts) == 3, f"line '{line}' has spelling, kind, name")
        if len(parts) != 3:
            continue
        spelling, kind, name = parts
        check(spelling == dev["device"] and kind == dev["device_kind"] and name == dev["name"],
              f"'{line}' agrees with --json")
        check(kind in DEVICE_KINDS, f"{spelling}: kind {kind}")
        # The spelling is exact: ADR_DEVICE accepts it and picks that device.
        rc, js2, err2 = run([info, "--json"], {"ADR_DEVICE": spelling})
        d2 = json.loads(js2) if rc == 0 else {}
        check(d2.get("default_device") == spelling,
              f"ADR_DEVICE={spelling} selects {d2.get('default_device')}")
    check(any(l.split()[:2] == ["cpu:0", "cpu"] for l in lines), "cpu:0 is listed as kind cpu")
    for dev in doc["devices"]:
        if dev["type"] in KIND_OF_TYPE:
            check(dev["kind"] == KIND_OF_TYPE[dev["type"]],
                  f"{dev['device']}: kind {dev['kind']} (type {dev['type']})")
    # Kinds of the drivers this machine's tests use: PoCL and lavapipe run on the CPU.
    for dev in doc["devices"]:
        props = dev["properties"]
        if dev["backend"] == "opencl":
            want = {"CPU": "cpu", "GPU": "gpu"}.get(props.get("device.type"), dev["kind"])
            check(dev["kind"] == want, f"{dev['device']}: device.type {props.get('device.type')}"
                  f" -> kind {dev['kind']}")
        if dev["backend"] == "vulkan":
            vt = props.get("device_type")
            want = "cpu" if vt == "cpu" else ("gpu" if "gpu" in str(vt) else "other")
            check(dev["kind"] == want, f"{dev['device']}: device_type {vt} -> kind {dev['kind']}")


DEVICE_KEYS = {"device", "type", "id", "kind", "device_kind", "uuid", "pci_bus_id",
               "same_physical", "name", "vendor", "backend", "driver",
               "memory_total", "memory_free", "alignment", "capabilities", "sharing",
               "properties"}
# devices[].sharing: adr_share_caps by name (docs/sharing.md).
SHARING = {"memory-export", "memory-import", "event-export", "event-import", "staged"}
# device_kind (adr_device_kind_name) and the schema-1 kind it maps to.
DEVICE_KINDS = {"gpu": "gpu", "integrated-gpu": "gpu", "cpu": "cpu",
                "accelerator": "accelerator", "other": "other"}
BACKEND_KEYS = {"name", "state", "path", "reason", "abi", "device_types", "device_count"}
TOP_KEYS = {"schema", "adr_version", "search_path", "default_device", "default_device_error",
            "validation", "ucx_module", "error", "backends", "devices"}


def int_or_null(v, positive=True):
    return v is None or (type(v) is int and (v > 0 or not positive))


def case_json(info, _demo, _bench, _src):
    """--json: schema 1, JSON numbers, null for unknown, the same keys everywhere."""
    for args in ([info, "--json"], [info, "-j", "--memory"]):
        rc, out, err = run(args)
        check(rc == 0, f"{' '.join(args[1:])}: exit 0")
        try:
            doc = json.loads(out)
        except ValueError as e:
            check(False, f"{' '.join(args[1:])}: valid JSON ({e})")
            continue
        check(set(doc) == TOP_KEYS, f"top-level keys {sorted(doc)}")
        check(doc["schema"] == 1 and doc["error"] is None, "schema 1, error null")
        check(type(doc["search_path"]) is list and all(type(p) is str for p in doc["search_path"]),
              "search_path is a list of directories")
        for b in doc["backends"]:
            check(set(b) == BACKEND_KEYS, f"backend {b['name']}: keys")
            loaded = b["state"] == "loaded"
            check(b["state"] in ("loaded", "absent", "excluded", "rejected", "unavailable"),
                  f"backend {b['name']}: state {b['state']}")
            check((type(b["device_count"]) is int) == loaded and
                  (b["abi"] is not None) == loaded,
                  f"backend {b['name']}: device_count/abi are numbers when loaded, else null")
            if loaded:
                check(type(b["abi"]["major"]) is int and type(b["abi"]["minor"]) is int,
                      f"backend {b['name']}: abi major/minor numbers")
            check(b["reason"] is None or b["reason"] != "", f"backend {b['name']}: reason")
        check(len(doc["devices"]) >= 1, "at least the CPU is listed")
        for d in doc["devices"]:
            keys = DEVICE_KEYS | ({"memory"} if "--memory" in args else set())
            check(set(d) == keys, f"device {d['device']}: the same keys as every device")
            check(type(d["sharing"]) is list and len(d["sharing"]) >= 1 and
                  set(d["sharing"]) <= SHARING,
                  f"device {d['device']}: sharing {d['sharing']!r}")
            check(d["device"] == f"{d['type']}:{d['id']}" and type(d["id"]) is int,
                  f"device {d['device']}: spelling is type:id")
            for k in ("memory_total", "memory_free", "alignment"):
                check(int_or_null(d[k]), f"device {d['device']}: {k} = {d[k]!r} (number > 0 or null)")
            check(type(d["properties"]) is dict and type(d["capabilities"]) is list,
                  f"device {d['device']}: properties object, capabilities list")
            check(DEVICE_KINDS.get(d["device_kind"]) == d["kind"],
                  f"device {d['device']}: device_kind {d['device_kind']} -> kind {d['kind']}")
            check(d["uuid"] is None or re.fullmatch(
                r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", d["uuid"]),
                  f"device {d['device']}: uuid {d['uuid']!r}")
            check(d["pci_bus_id"] is None or re.fullmatch(
                r"[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", d["pci_bus_id"]),
                  f"device {d['device']}: pci_bus_id {d['pci_bus_id']!r}")
            names = {x["device"] for x in doc["devices"]}
            check(type(d["same_physical"]) is list and d["device"] not in d["same_physical"]
                  and all(n in names for n in d["same_physical"]),
                  f"device {d['device']}: same_physical lists other devices")
            for n in d["same_physical"]:
                other = [x for x in doc["devices"] if x["device"] == n]
                check(other and d["device"] in other[0]["same_physical"],
                      f"same_physical is symmetric: {d['device']} / {n}")
            check(all(type(v) in (int, str) for v in d["properties"].values()),
                  f"device {d['device']}: property values are numbers or strings")
            for k, v in d["properties"].items():
                if type(v) is str and re.fullmatch(r"-?[1-9][0-9]{0,17}|0", v):
                    check(False, f"device {d['device']}: property {k} = {v!r} should be a number")
            if "--memory" in args:
                m = d["memory"]
                check(set(m) == {"device", "process"}, f"device {d['device']}: memory keys")
                check(all(int_or_null(m["device"][k]) for k in ("total", "free", "used")),
                      f"device {d['device']}: memory.device numbers or null")
                check("process" in m["process"]["scope"], f"device {d['device']}: scope says process")
                hp = m["process"].get("host_pages", "missing")
                if d["device"] == "cpu:0":
                    check(hp == {"huge_pages": "large", "populate": False},
                          f"cpu:0: host_pages by default ({hp})")
                else:
                    check(hp is None, f"device {d['device']}: host_pages null ({hp})")
                tc = m["process"].get("thread_cache", "missing")
                check(tc in ("biased", "locked"),
                      f"device {d['device']}: thread_cache biased or locked ({tc})")
        cpu = [d for d in doc["devices"] if d["device"] == "cpu:0"]
        check(cpu and type(cpu[0]["memory_total"]) is int and cpu[0]["memory_total"] > 0,
              "cpu:0 memory_total is a positive integer")
        check(cpu and type(cpu[0]["properties"].get("logical_cores")) is int,
              "cpu:0 property logical_cores is a JSON number")
        check(cpu and cpu[0]["device_kind"] == "cpu" and cpu[0]["uuid"] is None
              and cpu[0]["pci_bus_id"] is None, "cpu:0: kind cpu, no uuid or PCI address")
        # PoCL and lavapipe are the host CPU too (docs/devices.md).
        for d in doc["devices"]:
            if d["backend"] in ("opencl", "vulkan") and d["device_kind"] == "cpu" \
                    and d["pci_bus_id"] is None:
                check("cpu:0" in d["same_physical"], f"{d['device']} is the same device as cpu:0")


def case_json_error(info, _demo, _bench, _src):
    """A malformed selection variable: JSON describing the error, non-zero exit."""
    cases = [
        ({"ADR_DEVICE": "cpu:1000000"}, "below 1000000"),
        ({"ADR_DEVICE": "cuda:x"}, "ADR_DEVICE"),
        ({"ADR_BACKENDS": "cuda opencl"}, "ADR_BACKENDS"),
    ]
    for env, needle in cases:
        (k, v), = env.items()
        rc, out, err = run([info, "--json"], env)
        try:
            doc = json.loads(out)
        except ValueError:
            doc = None
        check(rc == 1 and doc is not None, f"{k}={v} --json: exit 1 with JSON on stdout (rc {rc})")
        if doc is None:
            continue
        e = doc.get("error") or {}
        check(doc.get("schema") == 1 and e.get("status") == "EINVAL" and e.get("errno") == 22 and
              needle in e.get("message", ""), f"{k}={v}: error {e}")
        rc, out, err = run([info], env)
        check(rc == 1 and needle in err, f"{k}={v} (text): the message on stderr, exit 1")
        rc, out, err = run([info, "--list"], env)
        check(rc == 1 and needle in err, f"{k}={v} --list: exit 1")
    # The bound itself: 999999 is a device id (no such device here), 1000000 is not.
    rc, out, _ = run([info, "--json"], {"ADR_DEVICE": "cpu:999999,cpu"})
    doc = json.loads(out) if rc == 0 else {}
    check(rc == 0 and doc.get("default_device") == "cpu:0",
          "ADR_DEVICE=cpu:999999,cpu parses (id below the bound), falls back to cpu:0")
    # No device available: every entry is named as written, with its own reason
    # (an excluded backend says so; "hip:*" is not garbled into "hip:*0").
    rc, out, _ = run([info, "--json"],
                     {"ADR_DEVICE": "hip:*,cuda:3", "ADR_BACKENDS": "cpu"})
    doc = json.loads(out) if out else {}
    msg = doc.get("default_device_error") or ""
    check(rc == 0 and doc.get("default_device") is None and
          "(hip:*: " in msg and "; cuda:3: " in msg and "hip:*0" not in msg and
          msg.count("excluded by ADR_BACKENDS") == 2,
          f"ADR_DEVICE=hip:*,cuda:3 without those backends: each entry and its reason ({msg!r})")


def case_memory(info, _demo, _bench, _src):
    """--memory in a fresh process: the device's own figures and per-process statistics."""
    rc, out, err = run([info, "--memory"])
    check(rc == 0, "adr-info --memory: exit 0")
    block = re.search(r"^  cpu:0 .*?(?=^  \S|\Z)", out, re.M | re.S)
    cpu = block.group(0) if block else ""
    m = re.search(r"device memory\s+total (\S+ \S+), free (\S+ \S+), in use (\S+ \S+)", cpu)
    check(m is not None and m.group(1) != "unknown" and not m.group(1).startswith("0.0"),
          f"cpu:0 device memory figures: {m.group(0) if m else None}")
    check("statistics are per process" in cpu and "this adr-info process" in cpu,
          "the statistics say whose they are")
    check("host pages: huge pages for chunks of 4 MiB+" in cpu, "cpu:0 shows its host-page advice")
    # ADR_ALLOC's host-page options, as adr-info shows them.
    for value, text, doc in (("pool:hugepages,populate", "host pages: huge pages for every chunk, populated",
                              {"huge_pages": "all", "populate": True}),
                             ("pool:nohugepages", None, {"huge_pages": "none", "populate": False}),
                             ("backend", "host pages: huge pages for chunks of 4 MiB+",
                              {"huge_pages": "large", "populate": False})):
        rc, out, _ = run([info, "--memory"], {"ADR_ALLOC": value, "ADR_BACKENDS": "cpu"})
        check(rc == 0 and ((text in out) if text else ("host pages" not in out)),
              f"ADR_ALLOC={value}: adr-info --memory says {text}")
        check(rc == 0 and ("thread cache: biased (membarrier)" in out or "thread cache: locked" in out),
              f"ADR_ALLOC={value}: adr-info --memory says how threads enter their caches")
        rc, out, _ = run([info, "--memory", "--json"], {"ADR_ALLOC": value, "ADR_BACKENDS": "cpu"})
        cpu = [d for d in json.loads(out)["devices"] if d["device"] == "cpu:0"] if rc == 0 else []
        check(cpu and cpu[0]["memory"]["process"].get("host_pages", "missing") == doc,
              f"ADR_ALLOC={value}: host_pages {doc}")


def case_log(info, demo, _bench, _src):
    """ADR_LOG only controls diagnostics: a value not understood is one warning."""
    for value, warn in (("verbose", "unknown level 'verbose'"),
                        ("debug,fil=x", "expected 'file=PATH'"),
                        ("", None), ("error", None), ("warn", None)):
        rc, out, err = run([info, "--list"], {"ADR_LOG": value})
        lines = [l for l in err.splitlines() if "ADR_LOG" in l]
        if warn:
            check(rc == 0 and len(lines) == 1 and warn in lines[0] and lines[0].startswith("adr: warn: "),
                  f"ADR_LOG={value}: exit 0, one warning ({lines})")
        else:
            check(rc == 0 and not lines, f"ADR_LOG={value}: exit 0, no warning")
    rc, _, err = run([info, "--list"], {"ADR_LOG": "verbose"})
    check(" debug: " not in err and " info: " not in err, "ADR_LOG=verbose: the default level")
    rc, _, err = run([info, "--list"], {"ADR_LOG": "debug,bogus"})
    check(" debug: " in err, "ADR_LOG=debug,bogus keeps the debug level")
    # The selection and allocation variables stay strict.
    for k, v in (("ADR_DEVICE", "verbose"), ("ADR_BACKENDS", "cpu opencl")):
        rc, _, err = run([info, "--list"], {k: v})
        check(rc == 1 and k in err, f"{k}={v}: still an error (rc {rc})")
    # ADR_ALLOC is read when memory is first allocated: the demo allocates.
    rc, _, err = run([demo, "--device", "cpu"], {"ADR_ALLOC": "bogus"})
    check(rc == 1 and "ADR_ALLOC" in err, f"ADR_ALLOC=bogus: still an error (rc {rc})")


def table_values(path, variable):
    with open(path) as f:
        for line in f:
            cells = [c.strip() for c in line.split("|")]
            if len(cells) > 3 and cells[1] == f"`{variable}`":
                return line
    return ""


def case_ucx(info, _demo, _bench, _src):
    """adr-info only looks for the UCX module (nothing of UCX is mapped); --ucx loads it."""
    def loaded_objects(args):
        rc, _, err = run([info] + args, {"LD_DEBUG": "files"})
        return rc, set(re.findall(r"file=(\S+) \[0\];  needed by", err)), err
    rc, out, _ = run([info])
    found = re.search(r"^ucx module: found \((\S+); not loaded: adr-info --ucx loads it\)$", out, re.M)
    unavailable = re.search(r"^ucx module: unavailable: ", out, re.M)
    check(rc == 0 and (found or unavailable), "adr-info: ucx module found or unavailable")
    rc, objs, err = loaded_objects([])
    check(rc == 0 and objs, f"LD_DEBUG=files lists what adr-info loads ({err[:200]!r})")
    check(not any(o.startswith(("libucs", "libucp", "libuct", "libucm")) for o in objs),
          f"adr-info maps no UCX library ({sorted(o for o in objs if o.startswith('libuc'))})")
    rc, out, _ = run([info, "--json"])
    u = json.loads(out)["ucx_module"] if rc == 0 else {}
    check(u.get("loaded") is False and u.get("available") == bool(found) and
          (u.get("path") == (found.group(1) if found else None)),
          f"adr-info --json: ucx_module found, not loaded ({u})")
    if not found:
        return
    rc, out, _ = run([info, "--ucx"])
    check(rc == 0 and f"ucx module: available ({found.group(1)})" in out,
          "adr-info --ucx: the module loads")
    rc, objs, _ = loaded_objects(["--ucx"])
    check(rc == 0 and any(o.startswith("libucp") for o in objs), "adr-info --ucx maps UCX")
    rc, out, _ = run([info, "--ucx", "--json"])
    u = json.loads(out)["ucx_module"] if rc == 0 else {}
    check(u.get("loaded") is True and u.get("available") is True and u.get("path") == found.group(1),
          f"adr-info --ucx --json: loaded ({u})")
    rc, _, err = run([info, "--list", "--ucx"])
    check(rc == 2 and "--ucx" in err, "--list does not combine with --ucx")


def case_docs(info, demo, bench, src):
    """docs/environment.md and adr(7) agree with the code and the backend READMEs."""
    env_md = os.path.join(src, "docs", "environment.md")
    row = table_values(env_md, "ADR_VULKAN_VALIDATION")
    readme = table_values(os.path.join(src, "backends", "vulkan", "README.md"), "ADR_VULKAN_VALIDATION")
    for v in ("off", "on", "fatal"):
        check(f"`{v}`" in row and f"`{v}`" in readme,
              f"ADR_VULKAN_VALIDATION value {v} in docs/environment.md and the backend README")
    with open(env_md) as f:
        variables = set(re.findall(r"`(ADR_[A-Z_]+)`", f.read()))
    with open(os.path.join(src, "man", "adr.7")) as f:
        man7 = f.read()
    for v in sorted(variables):
        check(re.search(r"\b" + v + r"\b", man7) is not None, f"adr(7) names {v}")
    for tool, name in ((info, "adr-info"), (demo, "adr-demo"), (bench, "adr-bench")):
        _, out, _ = run([tool, "--help"])
        with open(os.path.join(src, "man", name + ".1")) as f:
            page = f.read()
        check(page.startswith(".TH") or re.search(r"^\.TH " + name.upper().replace("-", r"\\?-"),
                                                  page, re.M) is not None, f"{name}.1 has .TH")
        for opt in sorted(set(re.findall(r"--[a-z][a-z-]*", out))):
            check(opt.replace("-", r"\-") in page, f"{name}(1) documents {opt}")
    # LICENSE, CHANGELOG.md, the policy and the README's consumers.
    rc, out, _ = run([info, "--version"])
    version = out.split()[-1] if rc == 0 else "?"
    with open(os.path.join(src, "LICENSE")) as f:
        lic = f.read()
    check("Apache License\n                           Version 2.0, January 2004" in lic and
          "END OF TERMS AND CONDITIONS" in lic and "9. Accepting Warranty or Additional Liability" in lic
          and lic.count("\n") > 190, "LICENSE is the full Apache-2.0 text")
    with open(os.path.join(src, "CHANGELOG.md")) as f:
        log = f.read()
    check("Keep a Changelog" in log and "## [Unreleased]" in log and f"## [{version}]" in log,
          f"CHANGELOG.md: Keep a Changelog, a section for {version}")
    with open(os.path.join(src, "core", "adr.map")) as f:
        nodes = re.findall(r"^(ADR_\d+\.\d+) \{", f.read(), re.M)
    with open(os.path.join(src, "docs", "abi-policy.md")) as f:
        policy = f.read()
    check(nodes and all(n in policy for n in nodes) and "SONAME" in policy and "Deprecat" in policy,
          f"docs/abi-policy.md: SONAME, deprecation, the version nodes {nodes}")
    with open(os.path.join(src, "README.md")) as f:
        readme = f.read()
    for needle in ("pkg-config --cflags --libs adr", "dependency('adr'", "find_package(adr",
                   "target_link_libraries(app PRIVATE adr::adr)", "meson install"):
        check(needle in readme, f"README shows {needle}")
    for page in ("adr-info.1", "adr-demo.1", "adr-bench.1", "adr.7"):
        p = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", os.path.join(src, "man", page)],
                           capture_output=True, text=True)
        check(p.returncode == 0 and p.stderr == "", f"{page} renders without warnings {p.stderr[:200]}")


def main():
    case, info, demo, bench = sys.argv[1:5]
    src = sys.argv[5] if len(sys.argv) > 5 else ""
    globals()["case_" + case.replace("-", "_")](info, demo, bench, src)
    print(f"{case}: {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
