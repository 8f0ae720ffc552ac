"""The package builds offline with its in-tree backend, the wheel bundles
the lrstream binary, and both entry points run it from a fresh venv."""

import os
import pty
import select
import shutil
import subprocess
import sys
import time
import zipfile

from conftest import ROOT


def run(*cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=600, **kw)


def build_wheel(tmp_path, binary, **extra):
    env = {**os.environ, "LRSTREAM_WHEEL_BINARY": binary, "PIP_NO_INDEX": "1", **extra}
    wheels = tmp_path / "wheels"
    # Default build isolation, no index: only works with no build requirements.
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index", "-w", str(wheels),
        os.path.join(ROOT, "python"), env=env)
    (whl,) = wheels.iterdir()
    return whl, env


def install(tmp_path, whl, env):
    """A fresh venv with whl installed; its dependencies (msgpack, numpy,
    torch) come from this interpreter's site-packages (no index here)."""
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", str(venv))
    py = str(venv / "bin" / "python")
    import msgpack
    site = run(py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    with open(os.path.join(site, "_lrstream_test_deps.pth"), "w") as f:
        f.write(os.path.dirname(os.path.dirname(msgpack.__file__)) + "\n")
    run(py, "-m", "pip", "install", "--no-index", "--no-deps", str(whl), env=env)
    return venv, py


def clean_env(venv, *path):
    """The environment without $LRSTREAM_BIN, PATH: venv/bin, path..., system dirs."""
    clean = {k: v for k, v in os.environ.items() if k != "LRSTREAM_BIN"}
    clean["PATH"] = os.pathsep.join([str(venv / "bin"), *map(str, path), "/usr/bin", "/bin"])
    return clean


def test_wheel_bundles_binary(tmp_path):
    # The Go build cache of the test binary is reused when CGO matches go's default.
    cgo = os.environ.get("CGO_ENABLED") or run("go", "env", "CGO_ENABLED").stdout.strip()
    whl, env = build_wheel(tmp_path, "1", CGO_ENABLED=cgo)
    assert whl.name.startswith("lrstream_client-0.1.0-py3-none-linux_"), whl.name
    with zipfile.ZipFile(whl) as z:
        info = z.getinfo("lrstream_client/bin/lrstream")
        assert (info.external_attr >> 16) & 0o111, "binary not executable"
        assert "lrstream_client/torch_dataset.py" in z.namelist()
    venv, py = install(tmp_path, whl, env)
    clean = clean_env(venv)
    out = run(py, "-c", "import lrstream_client._binary as b; print(b.find_lrstream())", env=clean, cwd=str(tmp_path))
    assert out.stdout.strip().endswith("site-packages/lrstream_client/bin/lrstream"), out.stdout
    for cmd in ([py, "-m", "lrstream_client", "help"], [str(venv / "bin" / "lrstream"), "help"]):
        out = subprocess.run(cmd, capture_output=True, text=True, env=clean, cwd=str(tmp_path), timeout=60)
        assert "serve" in out.stdout + out.stderr, (cmd, out.stdout, out.stderr)


def test_pure_wheel_finds_the_binary_on_path(tmp_path, lrstream_bin):
    """A pure-Python wheel's console script `lrstream` runs the real binary
    found on PATH after venv/bin, never itself (which looped forever), nor
    another install's console script; with no binary it fails at once."""
    whl, env = build_wheel(tmp_path, "0")
    assert whl.name == "lrstream_client-0.1.0-py3-none-any.whl", whl.name
    with zipfile.ZipFile(whl) as z:
        assert not [n for n in z.namelist() if "/bin/" in n], z.namelist()
    venv, py = install(tmp_path, whl, env)
    script = venv / "bin" / "lrstream"
    # Another install's console script (a copy) and a symlink to this one,
    # both on PATH before the real binary.
    other, link = tmp_path / "other", tmp_path / "link"
    other.mkdir()
    link.mkdir()
    shutil.copy(script, other / "lrstream")
    (link / "lrstream").symlink_to(script)
    bindir = os.path.dirname(lrstream_bin)
    want = run(lrstream_bin, "--version").stdout
    assert want.startswith("lrstream "), want
    for path in ([bindir], [other, bindir], [link, other, bindir]):
        envp = clean_env(venv, *path)
        for cmd in ([str(script), "--version"], ["lrstream", "--version"], [py, "-m", "lrstream_client", "--version"]):
            out = subprocess.run(cmd, capture_output=True, text=True, env=envp, cwd=str(tmp_path), timeout=60)
            assert (out.returncode, out.stdout) == (0, want), (path, cmd, out)
        out = run(py, "-c", "import lrstream_client._binary as b; print(b.find_lrstream())", env=envp)
        assert out.stdout.strip() == lrstream_bin, (path, out.stdout)

    # No binary: a clear error at once, naming the skipped console scripts.
    envp = clean_env(venv, other)
    for cmd in ([str(script), "--version"], [py, "-m", "lrstream_client", "--version"]):
        t0 = time.monotonic()
        out = subprocess.run(cmd, capture_output=True, text=True, env=envp, cwd=str(tmp_path), timeout=60)
        assert out.returncode == 1 and "no lrstream binary" in out.stderr, (cmd, out)
        assert str(other / "lrstream") in out.stderr, out.stderr
        assert time.monotonic() - t0 < 30, "slow failure"

    # LRStreamDataset(serve_args=...) fails at construction (it waited 30 s
    # for a server that never came, then raised a misleading TimeoutError).
    code = ("import time; from lrstream_client import LRStreamDataset\n"
            "t0 = time.monotonic()\n"
            "try:\n    LRStreamDataset(serve_args=['--batch-size', '8'])\n"
            "except FileNotFoundError as e:\n    print(f'{time.monotonic() - t0:.1f}', e)\n")
    out = run(py, "-c", code, env=envp, cwd=str(tmp_path))
    secs, msg = out.stdout.split(" ", 1)
    assert "cannot start a server" in msg and "no lrstream binary" in msg, out.stdout
    assert float(secs) < 5, out.stdout
    out = run(py, "-c", code.replace("['--batch-size', '8']", f"['--batch-size', '8'], lrstream={str(script)!r}"),
              env=clean_env(venv, bindir), cwd=str(tmp_path))
    assert "console script, not the lrstream binary" in out.stdout, out.stdout

    # $LRSTREAM_BIN naming the console script, or a wrapper of it the
    # lookup cannot recognize: an error, not a loop.
    wrapper = tmp_path / "wrapper"
    wrapper.write_text(f"#!/bin/sh\nexec {script} \"$@\"\n")
    wrapper.chmod(0o755)
    for binenv, want_err in ((script, "is lrstream-client's console script"), (wrapper, "was run again")):
        envp = {**clean_env(venv, bindir), "LRSTREAM_BIN": str(binenv)}
        out = subprocess.run([str(script), "--version"], capture_output=True, text=True, env=envp, timeout=60)
        assert out.returncode == 1 and want_err in out.stderr, (binenv, out)


def test_go_build_is_announced_on_the_terminal(tmp_path):
    """pip shows a build backend's output only with -v: `pip install
    ./python` compiled Go for minutes without a word. The backend says what
    it does on the controlling terminal; a fake `go` (slow, writes the
    binary) stands in for the real build."""
    fakebin = tmp_path / "fakebin"
    fakebin.mkdir()
    go = fakebin / "go"
    go.write_text("#!/bin/sh\nsleep 1.5\nwhile [ $# -gt 0 ]; do\n"
                  "  if [ \"$1\" = -o ]; then shift; printf fake > \"$1\"; chmod +x \"$1\"; fi; shift\ndone\n")
    go.chmod(0o755)
    env = {**os.environ, "PATH": f"{fakebin}{os.pathsep}{os.environ['PATH']}", "PIP_NO_INDEX": "1",
           "LRSTREAM_WHEEL_BINARY": "1", "LRSTREAM_BUILD_PROGRESS_SECS": "0.5"}
    master, slave = pty.openpty()
    name = os.ttyname(slave)
    try:
        # A new session whose controlling terminal is the pty (as a user's
        # shell); pip's own output goes to pipes.
        p = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index", "-w",
                            str(tmp_path / "w"), os.path.join(ROOT, "python")],
                           env=env, capture_output=True, text=True, timeout=300, start_new_session=True,
                           preexec_fn=lambda: os.close(os.open(name, os.O_RDWR)))
        assert p.returncode == 0, p
        tty = b""
        while select.select([master], [], [], 0.5)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            tty += chunk
    finally:
        os.close(master)
        os.close(slave)
    tty = tty.decode()
    assert "building the lrstream binary for the wheel" in tty, tty
    assert "still building the lrstream binary" in tty, tty
    assert "built the lrstream binary in" in tty, tty
    assert "building the lrstream binary" not in p.stdout, "pip shows backend output without -v now: drop the tty write"
