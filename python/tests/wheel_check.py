# SPDX-License-Identifier: Apache-2.0
"""The wheel: builds it from a copy of the source tree with meson-python
(pyproject.toml, offline, no build isolation), installs it into a scratch
target with pip, and imports it in a fresh interpreter with nothing of the
build tree reachable (no LD_LIBRARY_PATH, ADR_PLUGIN_PATH or PYTHONPATH to
it): the extension must find libadr, and libadr the backends, inside what
the wheel installed.

    python3 wheel_check.py SOURCE_ROOT

Exit 0 on success, 77 (skip, with the reason) when meson-python, pip or
patchelf is missing, 1 on failure. About 10 s on an idle 2-core machine
(the build has no tests and no tools).
"""
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

SKIP = 77


def skip(why):
    print("wheel_check: SKIP: " + why)
    sys.exit(SKIP)


def fail(why):
    print("wheel_check: FAIL: " + why)
    sys.exit(1)


def clean_env():
    """The environment without the build tree or a sanitizer runtime."""
    env = dict(os.environ)
    for k in ("LD_LIBRARY_PATH", "LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS",
              "ADR_PLUGIN_PATH", "ADR_BACKENDS", "ADR_DEVICE", "PYTHONPATH", "PYTHONHOME",
              "ADR_PY_TEST_ARROW_CONSUMER"):
        env.pop(k, None)
    env["PIP_NO_INDEX"] = "1"  # offline: nothing may be fetched
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def copy_tree(src, dst):
    """The source tree without build directories, VCS data or meson-python's
    scratch files (meson-python 0.12 writes into the source directory)."""
    top_ignored = {".git", ".cache", "_build"}

    def ignore(directory, names):
        if os.path.abspath(directory) == os.path.abspath(src):
            return [n for n in names if n in top_ignored or n.startswith("build") or
                    n.startswith(".mesonpy")]
        return [n for n in names if n == "__pycache__"]

    shutil.copytree(src, dst, ignore=ignore, symlinks=True)


def main():
    if len(sys.argv) != 2:
        fail("usage: wheel_check.py SOURCE_ROOT")
    root = sys.argv[1]
    if importlib.util.find_spec("mesonpy") is None:
        skip("meson-python is not installed (Debian: python3-mesonpy)")
    if shutil.which("patchelf") is None:
        skip("patchelf is not installed (meson-python needs it to bundle libadr)")
    py = sys.executable
    env = clean_env()
    have_pip = subprocess.run([py, "-m", "pip", "--version"], env=env, capture_output=True).returncode == 0
    with tempfile.TemporaryDirectory(prefix="adr-wheel-") as tmp:
        src = os.path.join(tmp, "src")
        dist = os.path.join(tmp, "dist")
        target = os.path.join(tmp, "target")
        os.mkdir(dist)
        copy_tree(root, src)
        if have_pip:
            cmd = [py, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q", "-w", dist, src]
        else:
            # Without pip: meson-python's PEP 517 hook, as a frontend calls it.
            cmd = [py, "-c", "import mesonpy, sys; mesonpy.build_wheel(sys.argv[1])", dist]
        r = subprocess.run(cmd, cwd=src, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            fail("building the wheel failed (%s):\n%s%s" % (" ".join(cmd), r.stdout[-4000:],
                                                             r.stderr[-4000:]))
        wheels = [f for f in os.listdir(dist) if f.endswith(".whl")]
        if len(wheels) != 1:
            fail("expected one wheel in %s, found %r" % (dist, wheels))
        wheel = os.path.join(dist, wheels[0])
        names = zipfile.ZipFile(wheel).namelist()
        print("wheel_check: built %s (%d files)" % (wheels[0], len(names)))
        if have_pip:
            cmd = [py, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target", target,
                   wheel]
            r = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if r.returncode != 0:
                fail("pip install --target failed:\n%s%s" % (r.stdout[-4000:], r.stderr[-4000:]))
        else:
            # What pip does with this wheel: the root and the purelib/platlib
            # data directories go to the target.
            with zipfile.ZipFile(wheel) as z:
                for n in z.namelist():
                    parts = n.split("/")
                    if parts[0].endswith(".data"):
                        if len(parts) < 3 or parts[1] not in ("purelib", "platlib"):
                            continue
                        out = os.path.join(target, *parts[2:])
                    else:
                        out = os.path.join(target, *parts)
                    os.makedirs(os.path.dirname(out), exist_ok=True)
                    with z.open(n) as fi, open(out, "wb") as fo:
                        shutil.copyfileobj(fi, fo)
        # The build tree and the copied sources go before the import.
        shutil.rmtree(src)
        probe = (
            "import adr, sys\n"
            "assert adr.__file__.startswith(sys.argv[1]), adr.__file__\n"
            "devs = adr.devices()\n"
            "assert adr.Device('cpu') in devs, devs\n"
            "b = adr.Device('cpu').alloc(16); b.fill(7); assert b.to_bytes() == bytes([7]) * 16\n"
            "import adr.numpy, numpy\n"
            "with adr.numpy.use(adr.numpy.allocator('cpu')):\n"
            "    a = numpy.ones(1000)\n"
            "assert numpy.core.multiarray.get_handler_name(a).startswith('adr:cpu:0')\n"
            "print(' '.join(d.name for d in devs))\n")
        env2 = dict(env)
        env2["PYTHONPATH"] = target
        r = subprocess.run([py, "-c", probe, target], cwd=tmp, env=env2, capture_output=True,
                           text=True)
        if r.returncode != 0:
            fail("importing the installed wheel failed:\n%s%s" % (r.stdout[-4000:], r.stderr[-4000:]))
        print("wheel_check: ok: the installed wheel imports and lists: " + r.stdout.strip())


if __name__ == "__main__":
    main()
