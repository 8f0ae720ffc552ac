"""``python -m lrstream_client ARGS`` (and the ``lrstream`` console script)
runs the lrstream binary (bundled in the platform wheel, else
$LRSTREAM_BIN, else on PATH) with ARGS."""

import os
import sys

from ._binary import CHAIN_ENV, find_lrstream


def main() -> None:
    me = os.path.realpath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    chain = [p for p in os.environ.get(CHAIN_ENV, "").split(os.pathsep) if p]
    if me and me in chain:
        sys.exit(f"lrstream: {me} was run again by the binary it resolved to ({' -> '.join(chain + [me])}): "
                 "a wrapper around lrstream-client's console script is on PATH or in $LRSTREAM_BIN; "
                 "point $LRSTREAM_BIN at the Go binary")
    try:
        exe = find_lrstream()
    except FileNotFoundError as e:
        sys.exit(f"lrstream: {e}")
    os.environ[CHAIN_ENV] = os.pathsep.join(chain + [me]) if me else os.pathsep.join(chain)
    os.execv(exe, [exe, *sys.argv[1:]])


if __name__ == "__main__":
    main()
