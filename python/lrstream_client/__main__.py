"""``python -m lrstream_client ARGS`` runs the lrstream binary (bundled in
the platform wheel, else on PATH) with ARGS."""

import os
import sys

from ._binary import find_lrstream


def main() -> None:
    exe = find_lrstream()
    os.execv(exe, [exe, *sys.argv[1:]])


if __name__ == "__main__":
    main()
