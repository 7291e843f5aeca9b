#!/usr/bin/env bash
# Instructions per line of `gpuwise report` on nvidia-smi CSV, counted by valgrind's callgrind
# on one thread. Unlike wall time, the count does not drift with the machine's speed, so it
# compares two versions of the reader on a shared or throttled machine.
#
#   bench/instructions.sh            # the first 200,000 lines of the 1M-sample input
#   bench/instructions.sh 50000      # fewer lines, quicker
#
# Needs valgrind. The input is generated as in bench/run.sh (100 GPUs, 60 s samples, seed 7)
# under bench/out/ when missing. The count includes start-up (about 27M instructions: the
# built-in catalog), about 135 per line at 200,000 lines.
set -euo pipefail
cd "$(dirname "$0")/.."
lines=${1:-200000}
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 2; }
cargo build --release --locked --quiet
bin=target/release/gpuwise
mkdir -p bench/out
src=bench/out/smi-1m.csv
if [ ! -f "$src" ]; then
  parts=$(mktemp -d)
  "$bin" generate --out "$parts" --gpus 100 --days 7 --interval 60s --format nvidia-smi --seed 7 --yes 2>/dev/null
  first=1
  for f in $(ls "$parts" | grep -v truth.json | sort); do
    if [ $first = 1 ]; then cat "$parts/$f"; first=0; else tail -n +2 "$parts/$f"; fi
  done > "$src"
  rm -rf "$parts"
fi
input=bench/out/smi-$lines.csv
head -n $((lines + 1)) "$src" > "$input"
out=$(mktemp)
RAYON_NUM_THREADS=1 valgrind --tool=callgrind --callgrind-out-file="$out" \
  "$bin" report "$input" --format json --no-progress 2>&1 >/dev/null | grep 'refs' |
  awk -v n="$lines" '{gsub(",", "", $4); printf "%s instructions, %.0f per line (%d lines)\n", $4, $4 / n, n}'
rm -f "$out"
