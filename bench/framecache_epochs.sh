#!/bin/bash
# The frame cache's first-epoch and later-epoch cost (docs/performance.md, "Frame cache").
#
#   bench/framecache_epochs.sh ROUNDS DATASET RECIPE NAME=LRSTREAM...
#
# For each round and each binary in turn: a 1-epoch and a 3-epoch shuffled stream, the
# first binary's runs with --frame-cache off, the others' with an empty cache (emptied and
# synced before each run, outside the timing). Prints wall seconds, CPU (user+system) and
# what the run's summary line says was stored. Epochs 2 and 3 of a binary are its 3-epoch
# wall less its 1-epoch wall.
#
# FLAGS="..." (optional): more stream flags for every run, e.g. FLAGS="--resize 224x224".
# FLOOR=1 (optional): each round starts with the FFmpeg floor — FFmpeg decoding every video
# file of the dataset one after the other, nothing converted or written (ffmpeg -i FILE -map
# 0:v:0 -f null -, the `bench` ffmpeg stage's command), with $LRSTREAM_FFMPEG's ffmpeg if set —
# so that later epochs are set against the floor measured in the same rounds.
# EPOCHS="1" (optional): the epoch counts to run, "1 3" unless given (EPOCHS=1 times only
# first epochs, alternating the arms).
# WARM_MB=N (optional): before every run (both arms), write and delete an N MB file, so that
# the run finds N MB of free memory the kernel has just used. On a VM whose free memory goes
# back to the hypervisor (virtio-balloon free page reporting), memory the guest has not used
# lately costs a fault in the host on first touch; a write into the page cache pays it per
# page (docs/performance.md, "What the first epoch pays").
set -u
if [ $# -lt 4 ]; then
  sed -n '2,10p' "$0" >&2
  exit 2
fi
rounds=$1 ds=$2 recipe=$3
shift 3
cold=$(mktemp -d)
trap 'rm -rf "$cold"' EXIT
first=1
ffmpeg=${LRSTREAM_FFMPEG:-ffmpeg}
for i in $(seq "$rounds"); do
  first=1
  if [ "${FLOOR:-0}" = 1 ]; then
    t0=$(date +%s.%N)
    /usr/bin/time -f "%U %S" -o "$cold.time" bash -c 'for f in "$@"; do
        "$0" -nostdin -hide_banner -loglevel error -i "$f" -map 0:v:0 -f null - || exit 1; done' \
      "$ffmpeg" $(find "$ds/videos" -name '*.mp4' | sort)
    t1=$(date +%s.%N)
    printf 'floor wall %.3f cpu %s\n' "$(echo "$t1 - $t0" | bc)" "$(awk '{print $1 + $2}' "$cold.time")"
  fi
  for spec in "$@"; do
    name=${spec%%=*} bin=${spec#*=}
    for ep in ${EPOCHS:-1 3}; do
      if [ $first = 1 ]; then
        flags=(--frame-cache off)
      else
        rm -rf "${cold:?}"/*; sync
        flags=(--frame-cache-dir "$cold")
      fi
      if [ "${WARM_MB:-0}" -gt 0 ]; then
        dd if=/dev/zero of="$cold.warm" bs=1M count="$WARM_MB" status=none; rm -f "$cold.warm"
      fi
      t0=$(date +%s.%N)
      stored=$(/usr/bin/time -f "%U %S" -o "$cold.time" "$bin" stream --dataset "$ds" --recipe "$recipe" \
        --batch-size 32 --shuffle --epochs $ep --seed 7 ${FLAGS:-} "${flags[@]}" 2>&1 >/dev/null |
        grep -o '[0-9]* decoded and stored\|[0-9]* decoded segments not stored' | tr '\n' ' ')
      t1=$(date +%s.%N)
      printf '%s epochs=%d wall %.3f cpu %s %s\n' "$name" $ep "$(echo "$t1 - $t0" | bc)" \
        "$(awk '{print $1 + $2}' "$cold.time")" "$stored"
    done
    first=0
  done
done
rm -f "$cold.time"
