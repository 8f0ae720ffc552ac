"""In-tree PEP 517 build backend for lrstream-client (no build dependencies,
so ``pip install ./python`` works offline).

Wheels: when ``go`` is on PATH and the Go module (the repository root, one
directory up) is present, the build runs ``go build ./cmd/lrstream`` and
bundles the binary as ``lrstream_client/bin/lrstream``; the wheel is then
tagged for this platform (``py3-none-<platform>``), as ruff and uv ship
theirs. Otherwise (or with ``LRSTREAM_WHEEL_BINARY=0``) it builds a
pure-Python ``py3-none-any`` wheel, which looks for ``lrstream`` on PATH.
``LRSTREAM_WHEEL_BINARY=1`` makes a missing Go toolchain an error.

pip shows a backend's output only with ``-v``: the Go build announces
itself (and every 30 s that it is still going) on the controlling terminal
as well as stderr, so ``pip install ./python`` does not sit silent for the
minutes a cold Go build takes.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
import zipfile

NAME = "lrstream_client"
DIST = "lrstream-client"
VERSION = "0.1.0"
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/
REPO = os.path.dirname(HERE)

METADATA = f"""Metadata-Version: 2.1
Name: {DIST}
Version: {VERSION}
Summary: Read rendered, collated LeRobot batches from lrstream (pipe, file or Unix socket); PyTorch dataset
Requires-Python: >=3.9
Requires-Dist: msgpack>=1.0
Requires-Dist: numpy
Provides-Extra: torch
Requires-Dist: torch; extra == "torch"
"""

ENTRY_POINTS = "[console_scripts]\nlrstream = lrstream_client.__main__:main\n"


def _platform_tag() -> str:
    return sysconfig.get_platform().replace("-", "_").replace(".", "_")


def _go_binary(tmp: str):
    want = os.environ.get("LRSTREAM_WHEEL_BINARY", "")
    if want == "0":
        return None
    have_go = shutil.which("go") is not None and os.path.isfile(os.path.join(REPO, "go.mod"))
    if not have_go:
        if want == "1":
            raise RuntimeError("LRSTREAM_WHEEL_BINARY=1 but no Go toolchain or no Go module at " + REPO)
        return None
    out = os.path.join(tmp, "lrstream")
    env = {**os.environ, "CGO_ENABLED": os.environ.get("CGO_ENABLED", "0")}
    cmd = ["go", "build", "-trimpath", "-o", out, "./cmd/lrstream"]
    _say(f"lrstream-client: building the lrstream binary for the wheel ({' '.join(cmd[:3])} ./cmd/lrstream in {REPO}); "
         "from a cold Go cache this takes minutes. LRSTREAM_WHEEL_BINARY=0 builds a pure-Python wheel instead "
         "(docs/python.md, \"Installing\").")
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=REPO, env=env)
    while True:
        try:
            rc = proc.wait(timeout=PROGRESS_EVERY)
            break
        except subprocess.TimeoutExpired:
            _say(f"lrstream-client: still building the lrstream binary ({time.monotonic() - t0:.0f} s)")
    if rc != 0:
        raise subprocess.CalledProcessError(rc, cmd)
    _say(f"lrstream-client: built the lrstream binary in {time.monotonic() - t0:.0f} s")
    return out


# How often a long Go build says it is still going (seconds).
PROGRESS_EVERY = float(os.environ.get("LRSTREAM_BUILD_PROGRESS_SECS") or 30)


def _say(msg: str) -> None:
    """msg on stderr and, when stderr is not a terminal, on the controlling
    terminal too: pip captures a build backend's output and shows it only
    with -v, so a user would see nothing for the minutes a Go build takes."""
    line = msg + "\n"
    sys.stderr.write(line)
    sys.stderr.flush()
    try:
        if sys.stderr.isatty():
            return
        with open("/dev/tty", "w") as tty:
            tty.write(line)
    except OSError:  # no controlling terminal (CI, a daemon): stderr only
        pass


def _record_line(arc: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arc},sha256={digest},{len(data)}"


def _sources():
    pkg = os.path.join(HERE, NAME)
    for f in sorted(os.listdir(pkg)):
        if f.endswith(".py"):
            yield f"{NAME}/{f}", os.path.join(pkg, f)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    with tempfile.TemporaryDirectory() as tmp:
        binary = _go_binary(tmp)
        tag = f"py3-none-{_platform_tag()}" if binary else "py3-none-any"
        name = f"{NAME}-{VERSION}-{tag}.whl"
        distinfo = f"{NAME}-{VERSION}.dist-info"
        records = []
        path = os.path.join(wheel_directory, name)
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
            def add(arc, data, mode=0o644):
                zi = zipfile.ZipInfo(arc, date_time=(2020, 1, 1, 0, 0, 0))
                zi.external_attr = (0o100000 | mode) << 16
                zi.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(zi, data)
                records.append(_record_line(arc, data))

            for arc, src in _sources():
                with open(src, "rb") as f:
                    add(arc, f.read())
            if binary:
                with open(binary, "rb") as f:
                    add(f"{NAME}/bin/lrstream", f.read(), 0o755)
            add(f"{distinfo}/METADATA", METADATA.encode())
            add(f"{distinfo}/WHEEL", (f"Wheel-Version: 1.0\nGenerator: lrstream_build\nRoot-Is-Purelib: "
                                      f"{'false' if binary else 'true'}\nTag: {tag}\n").encode())
            add(f"{distinfo}/entry_points.txt", ENTRY_POINTS.encode())
            records.append(f"{distinfo}/RECORD,,")
            z.writestr(zipfile.ZipInfo(f"{distinfo}/RECORD", date_time=(2020, 1, 1, 0, 0, 0)),
                       "\n".join(records) + "\n")
        return name


def build_sdist(sdist_directory, config_settings=None):
    base = f"{DIST.replace('-', '_')}-{VERSION}"
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for rel in ["pyproject.toml", "_build/lrstream_build.py"] + [a for a, _ in _sources()]:
            t.add(os.path.join(HERE, rel), arcname=f"{base}/{rel}")
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        data = METADATA.encode()
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return name


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []
