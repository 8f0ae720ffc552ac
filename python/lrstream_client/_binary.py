"""Finding the lrstream binary: the one bundled in a platform wheel
(lrstream_client/bin/lrstream), else ``lrstream`` on PATH."""

from __future__ import annotations

import os
import shutil

BUNDLED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "lrstream")


def find_lrstream() -> str:
    """Path of the lrstream binary: $LRSTREAM_BIN, the bundled one, or PATH's."""
    env = os.environ.get("LRSTREAM_BIN")
    if env:
        return env
    if os.path.isfile(BUNDLED) and os.access(BUNDLED, os.X_OK):
        return BUNDLED
    found = shutil.which("lrstream")
    if found:
        return found
    raise FileNotFoundError("no lrstream binary: this lrstream-client install has none bundled (a pure-Python "
                            "build), none is on PATH and $LRSTREAM_BIN is not set; install the platform wheel, "
                            "or `go install github.com/lrstream/lrstream/cmd/lrstream@latest`")
