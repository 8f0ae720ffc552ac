"""The package builds offline with its in-tree backend, the wheel bundles
the lrstream binary, and both entry points run it from a fresh venv."""

import os
import subprocess
import sys
import zipfile

from conftest import ROOT


def run(*cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=600, **kw)


def test_wheel_bundles_binary(tmp_path):
    env = {**os.environ, "LRSTREAM_WHEEL_BINARY": "1", "PIP_NO_INDEX": "1"}
    # The Go build cache of the test binary is reused when CGO matches go's default.
    env.setdefault("CGO_ENABLED", run("go", "env", "CGO_ENABLED").stdout.strip())
    wheels = tmp_path / "wheels"
    # Default build isolation, no index: only works with no build requirements.
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index", "-w", str(wheels),
        os.path.join(ROOT, "python"), env=env)
    (whl,) = wheels.iterdir()
    assert whl.name.startswith("lrstream_client-0.1.0-py3-none-linux_"), whl.name
    with zipfile.ZipFile(whl) as z:
        info = z.getinfo("lrstream_client/bin/lrstream")
        assert (info.external_attr >> 16) & 0o111, "binary not executable"
        assert "lrstream_client/torch_dataset.py" in z.namelist()
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", str(venv))
    py = str(venv / "bin" / "python")
    # msgpack and numpy come from this interpreter's site-packages (no index here).
    import msgpack
    site = run(py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    with open(os.path.join(site, "_lrstream_test_deps.pth"), "w") as f:
        f.write(os.path.dirname(os.path.dirname(msgpack.__file__)) + "\n")
    run(py, "-m", "pip", "install", "--no-index", "--no-deps", str(whl), env=env)
    clean = {k: v for k, v in os.environ.items() if k != "LRSTREAM_BIN"}
    clean["PATH"] = str(venv / "bin") + os.pathsep + "/usr/bin:/bin"
    out = run(py, "-c", "import lrstream_client._binary as b; print(b.find_lrstream())", env=clean, cwd=str(tmp_path))
    assert out.stdout.strip().endswith("site-packages/lrstream_client/bin/lrstream"), out.stdout
    for cmd in ([py, "-m", "lrstream_client", "help"], [str(venv / "bin" / "lrstream"), "help"]):
        out = subprocess.run(cmd, capture_output=True, text=True, env=clean, cwd=str(tmp_path), timeout=60)
        assert "serve" in out.stdout + out.stderr, (cmd, out.stdout, out.stderr)
