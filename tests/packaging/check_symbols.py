#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The exported ABI of libadr.so against tests/packaging/libadr.symbols.

    check_symbols.py LIBADR SYMBOLS            compare
    check_symbols.py LIBADR SYMBOLS --selftest the comparison must fail on a
                                               removed, re-versioned and
                                               unlisted symbol

Fails when a listed symbol is no longer exported, when it is exported
with another version (adr_alloc@@ADR_0.1 becoming adr_alloc@@ADR_0.2 is
an ABI break for every program linked against the old node), when a
symbol is exported that the list does not name (a new function must be
added to a version node of core/adr.map and to the list on purpose, see
docs/abi-policy.md), or when an export is not an adr_* function with a
symbol version. The exports come from `nm -D --defined-only`.
"""
import re
import subprocess
import sys


def exported(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True, capture_output=True,
                         text=True).stdout
    return sorted(line.split()[-1] for line in out.splitlines() if line.strip())


def listed(path):
    with open(path) as f:
        return sorted(l.strip() for l in f if l.strip() and not l.startswith("#"))


def split(sym):
    name, sep, version = sym.partition("@@")
    if not sep:
        name, _, version = sym.partition("@")
    return name, version


def compare(actual, expected):
    """Returns the list of problems (empty: the ABI is as listed)."""
    problems = []
    a = dict(split(s) for s in actual)
    e = dict(split(s) for s in expected)
    for name, version in sorted(e.items()):
        if name not in a:
            problems.append(f"removed: {name}@@{version} is listed but no longer exported")
        elif a[name] != version:
            problems.append(f"version changed: {name} was @@{version}, is now @@{a[name] or '(none)'}")
    for name, version in sorted(a.items()):
        if name not in e:
            problems.append(f"not listed: {name}@@{version or '(none)'} is exported; add it to a "
                            "version node of core/adr.map and to tests/packaging/libadr.symbols")
    for name, version in sorted(a.items()):
        if re.fullmatch(r"ADR_\d+\.\d+", name):
            continue  # the version node itself (an absolute symbol)
        if not name.startswith("adr_") or name.startswith("adr__"):
            problems.append(f"not public: {name} is exported but is not an adr_* function")
        if not re.fullmatch(r"ADR_\d+\.\d+", version or ""):
            problems.append(f"unversioned: {name} has no ADR_x.y symbol version")
    return problems


def main():
    lib, symbols = sys.argv[1], sys.argv[2]
    actual, expected = exported(lib), listed(symbols)
    if len(sys.argv) > 3 and sys.argv[3] == "--selftest":
        victim = next(s for s in expected if s.startswith("adr_alloc@@"))
        cases = {
            "removed": (actual, expected + ["adr_gone_function@@ADR_0.1"], "removed:"),
            "version changed": (actual, [s.replace("@@ADR_0.1", "@@ADR_0.9") if s == victim else s
                                         for s in expected], "version changed:"),
            "not listed": (actual, [s for s in expected if s != victim], "not listed:"),
            "unversioned": (actual + ["adr_plain"], expected + ["adr_plain"], "unversioned:"),
            "not public": (actual + ["helper@@ADR_0.1"], expected + ["helper@@ADR_0.1"],
                           "not public:"),
        }
        bad = 0
        for what, (a, e, prefix) in cases.items():
            problems = compare(a, e)
            ok = any(p.startswith(prefix) for p in problems)
            print(f"{'ok' if ok else 'FAIL'}: a {what} symbol is reported ({problems[:1]})")
            bad += not ok
        clean = compare(actual, expected)
        print(f"{'ok' if not clean else 'FAIL'}: the library as built matches the list")
        return 1 if bad or clean else 0
    problems = compare(actual, expected)
    for p in problems:
        print(p)
    print(f"{len(actual)} exported symbols, {len(expected)} listed, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
