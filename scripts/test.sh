#!/usr/bin/env bash
# Installs what the tests need and runs every test: Debian's FFmpeg (camera frames, torchcodec),
# a cached Python 3.12 virtualenv with the pinned test requirements (torch, torchdata, lerobot,
# huggingface_hub, pyarrow, av; scripts/venv.sh), the Go modules, a pinned staticcheck, a pinned
# versitygw (the S3-compatible server of the S3 tests) and imageio-ffmpeg's static FFmpeg (a
# second FFmpeg build for the same-frames tests); then
# go mod tidy -diff, go vet, staticcheck, go test and the Python suites. This is the README's test command and what .ci/run runs.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
start=$(date +%s)
# step NAME CMD...: runs CMD and prints how long it took (where a CI run's time goes).
step() {
  local name=$1 t0; shift; t0=$(date +%s)
  "$@"
  echo "scripts/test.sh: $name $(( $(date +%s) - t0 )) s" >&2
}
if ! command -v ffmpeg >/dev/null 2>&1 || ! command -v ffprobe >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    echo "scripts/test.sh: installing Debian's ffmpeg" >&2
    (apt-get update -qq && apt-get install -y -qq ffmpeg) >/dev/null
  else
    echo "scripts/test.sh: ffmpeg is missing; install it (sudo apt-get install ffmpeg)" >&2
    exit 1
  fi
fi
t0=$(date +%s); venv=$(scripts/venv.sh)
echo "scripts/test.sh: venv $(( $(date +%s) - t0 )) s" >&2
export LRSTREAM_PYTHON="$venv/bin/python" LRSTREAM_REQUIRE_PYTHON=1
# FFmpeg is installed above: camera frame tests must run, never skip.
export LRSTREAM_REQUIRE_FFMPEG=1
# The tests' frame cache (docs/video.md, "Frame cache") is theirs, fresh for each run:
# every camera test runs with the cache on, as users do, without reading or filling the
# user's ~/.cache/lrstream/frames.
LRSTREAM_FRAME_CACHE_DIR="$(mktemp -d -t lrstream-frames.XXXXXX)"
export LRSTREAM_FRAME_CACHE_DIR
trap 'rm -rf "$LRSTREAM_FRAME_CACHE_DIR"' EXIT
step "go mod download" go mod download
# go.mod and go.sum must be tidy (a diff fails).
step "go mod tidy -diff" go mod tidy -diff
step "go vet" go vet ./...
# staticcheck, pinned, installed once from the Go module proxy into a cached GOBIN; every
# finding fails (staticcheck.conf says which check is off and why).
staticcheck_version=v0.8.2
gobin=${LRSTREAM_GOBIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lrstream}/gobin-staticcheck-$staticcheck_version
if [ ! -x "$gobin/staticcheck" ]; then
  echo "scripts/test.sh: installing staticcheck $staticcheck_version into $gobin" >&2
  GOBIN="$gobin" go install "honnef.co/go/tools/cmd/staticcheck@$staticcheck_version"
fi
step staticcheck "$gobin/staticcheck" ./...
# versitygw (Apache-2.0), the real S3-compatible server fetch/s3's tests run against (posix
# backend, in a temporary directory): pinned, built once from the Go module proxy into a cached
# GOBIN like staticcheck (~4 min cold, mostly downloads; docs/architecture.md says why this
# server). The S3 tests are required here: without the binary they fail instead of skipping.
versitygw_version=v1.8.0
s3bin=${LRSTREAM_GOBIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lrstream}/gobin-versitygw-$versitygw_version
if [ ! -x "$s3bin/versitygw" ]; then
  echo "scripts/test.sh: building versitygw $versitygw_version into $s3bin" >&2
  step "build versitygw" env GOBIN="$s3bin" GOFLAGS=-mod=mod go install "github.com/versity/versitygw/cmd/versitygw@$versitygw_version"
fi
# AWS_EC2_METADATA_DISABLED: the tests never probe an instance metadata service.
export LRSTREAM_S3_SERVER="$s3bin/versitygw" LRSTREAM_REQUIRE_S3_SERVER=1 AWS_EC2_METADATA_DISABLED=true
# A second FFmpeg build for video's test that two builds give the same frames (docs/video.md,
# "Which FFmpeg"): the statically linked FFmpeg that imageio-ffmpeg (PyPI) bundles, downloaded
# once with the venv's pip into a cache keyed by its version (the venv itself is not changed).
altff_version=0.8.1
altff=${LRSTREAM_GOBIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lrstream}/imageio-ffmpeg-$altff_version
if [ ! -x "$altff/ffmpeg" ]; then
  echo "scripts/test.sh: fetching imageio-ffmpeg $altff_version's FFmpeg into $altff" >&2
  wheels=$(mktemp -d)
  "$venv/bin/python" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    -d "$wheels" "imageio-ffmpeg==$altff_version" >&2
  "$venv/bin/python" - "$wheels" "$altff" <<'PY'
import glob, os, shutil, sys, zipfile
wheels, out = sys.argv[1], sys.argv[2]
(whl,) = glob.glob(os.path.join(wheels, "*.whl"))
with zipfile.ZipFile(whl) as z:
    (name,) = [n for n in z.namelist() if "/binaries/ffmpeg-" in n]
    os.makedirs(out + ".tmp", exist_ok=True)
    with z.open(name) as src, open(os.path.join(out + ".tmp", "ffmpeg"), "wb") as dst:
        shutil.copyfileobj(src, dst)
os.chmod(os.path.join(out + ".tmp", "ffmpeg"), 0o755)
shutil.rmtree(out, ignore_errors=True)
os.rename(out + ".tmp", out)
PY
  rm -rf "$wheels"
fi
export LRSTREAM_ALT_FFMPEG="$altff/ffmpeg" LRSTREAM_REQUIRE_ALT_FFMPEG=1
step "go test" go test ./...
step "pytest python/tests" "$venv/bin/python" -m pytest -q python/tests
step "pytest python/interop" "$venv/bin/python" -m pytest -q --durations=10 python/interop
# The same camera and depth pixels against LeRobot's, decoded by the second (static) FFmpeg build:
# what docs/video.md, "Which FFmpeg", promises of LRSTREAM_FFMPEG.
step "pytest camera interop, static FFmpeg" env LRSTREAM_FFMPEG="$LRSTREAM_ALT_FFMPEG" \
  "$venv/bin/python" -m pytest -q python/interop/test_camera_pixels.py python/interop/test_lerobot_depth.py
echo "scripts/test.sh: all suites passed in $(( $(date +%s) - start )) s" >&2
