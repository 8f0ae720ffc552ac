#!/usr/bin/env bash
# Prints the path of a Python 3.12 virtualenv holding python/requirements-test.txt, creating it
# on first use. The venv is cached under $LRSTREAM_VENV_CACHE (default ~/.cache/lrstream) and
# keyed by the requirements file's SHA-256, so a changed pin builds a new one and an unchanged
# one costs nothing. Progress goes to stderr; stdout is only the path.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
req="$root/python/requirements-test.txt"
key=$(sha256sum "$req" | cut -c1-16)
cache=${LRSTREAM_VENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lrstream}
venv="$cache/venv-py312-$key"
if [ -x "$venv/bin/python" ] && [ -f "$venv/.complete" ]; then
  echo "$venv"; exit 0
fi
# lerobot >= 0.6 requires Python >= 3.12: find one (PATH, then pyenv's versions).
py=${LRSTREAM_PY312:-}
ok() { "$1" -c 'import sys, venv; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; }
if [ -z "$py" ]; then
  # pyenv's shims exist on PATH even when they cannot run: try each candidate.
  for c in python3.12 python3.13 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3 \
           "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.13*/bin/python3 python3; do
    if ok "$c"; then py=$c; break; fi
  done
fi
if [ -z "$py" ]; then
  echo "scripts/venv.sh: no Python >= 3.12 found (lerobot needs it); set LRSTREAM_PY312=/path/to/python3.12" >&2
  exit 1
fi
echo "scripts/venv.sh: creating $venv with $py (first run downloads ~3 GB from PyPI, ~2 min)" >&2
# A venv is usable only once .complete exists: an interrupted install is started afresh.
rm -rf "$venv"
mkdir -p "$cache"
"$py" -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req" >&2
touch "$venv/.complete"
echo "$venv"
