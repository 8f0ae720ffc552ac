"""Finding the lrstream binary: the one bundled in a platform wheel
(lrstream_client/bin/lrstream), else ``lrstream`` on PATH.

A pure-Python install (``py3-none-any`` wheel) also puts a console script
named ``lrstream`` on PATH (``venv/bin/lrstream``, this package's
``__main__``): the PATH lookup never resolves to it (nor to any other
install's console script), or the script would exec itself forever.
"""

from __future__ import annotations

import os
import sys
from typing import List, Optional

BUNDLED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "lrstream")

# Set by __main__ before it execs the binary: the real paths of the console
# scripts (os.pathsep-separated) that exec'd on the way. A script finding
# itself in it was exec'd by itself (through a wrapper the lookup could not
# recognize): it stops with an error instead of looping.
CHAIN_ENV = "LRSTREAM_CLIENT_EXEC_CHAIN"

_NOT_FOUND = ("no lrstream binary: this lrstream-client install has none bundled (a pure-Python "
              "build), none is on PATH (only lrstream-client's own `lrstream` console script{skipped}) "
              "and $LRSTREAM_BIN is not set; install the platform wheel (built where Go is available: "
              "docs/python.md, \"Installing\"), put the Go binary on PATH "
              "(`go install github.com/lrstream/lrstream/cmd/lrstream@latest`) or set $LRSTREAM_BIN")


def is_client_script(path: str) -> bool:
    """Whether path is a console script of lrstream-client (a Python script
    running lrstream_client.__main__), not the Go binary."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return head.startswith(b"#!") and b"lrstream_client" in head


def _running_script() -> Optional[str]:
    """The real path of the console script running this process, if any."""
    argv0 = sys.argv[0] if sys.argv else ""
    if not argv0 or argv0 == "-c":
        return None
    return os.path.realpath(argv0)


def _path_candidates(path: Optional[str] = None) -> List[str]:
    """Executable files named lrstream in PATH's directories, in order."""
    out = []
    for d in (path if path is not None else os.environ.get("PATH", os.defpath)).split(os.pathsep):
        f = os.path.join(d or os.curdir, "lrstream")
        if os.path.isfile(f) and os.access(f, os.X_OK):
            out.append(f)
    return out


def find_lrstream(path: Optional[str] = None) -> str:
    """Path of the lrstream binary: $LRSTREAM_BIN, the bundled one, or the
    first ``lrstream`` on PATH that is not a console script of this package
    (path: a PATH string to search instead of $PATH)."""
    env = os.environ.get("LRSTREAM_BIN")
    if env:
        if is_client_script(env):
            raise FileNotFoundError(f"$LRSTREAM_BIN={env} is lrstream-client's console script, not the lrstream "
                                    "binary: point it at the Go binary")
        return env
    if os.path.isfile(BUNDLED) and os.access(BUNDLED, os.X_OK):
        return BUNDLED
    me = _running_script()
    skipped = []
    for f in _path_candidates(path):
        if os.path.realpath(f) == me or is_client_script(f):
            skipped.append(f)
            continue
        return f
    raise FileNotFoundError(_NOT_FOUND.format(skipped=": " + ", ".join(skipped) if skipped else ""))
