#!/usr/bin/env bash
# The history store at the issue's scale (docs/history.md):
#  1. a year of a 1,000-GPU fleet at 30 s (1.05 billion samples) folded into a store by the
#     same tiles and writes as `gpuwise rollup` (crates/gpuwise-store/examples/year.rs: the
#     samples made in memory; a year of such logs would be ~100 GB of files), compacted after
#     35 days: its size;
#  2. `gpuwise review` of the year's last month against the eleven before it, read from that
#     store: median wall time and peak RSS;
#  3. `rollup` against `report` on the same day of files (1,000 GPUs at 30 s, nvidia-smi):
#     whether rolling up keeps up with reading.
#
#   bench/history.sh [--runs N] [--dir DIR] [--gpus N] [--days N]
set -euo pipefail
runs=3
dir=bench/out/history
gpus=1000
days=365
while [[ $# -gt 0 ]]; do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --gpus) gpus=$2; shift 2 ;;
    --days) days=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
cargo build --release --locked --quiet
cargo build --release --locked --quiet -p gpuwise-store --example year
bin=target/release/gpuwise
mkdir -p "$dir"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

rm -rf "$dir/store"
echo "year: $(target/release/examples/year "$dir/store" "$gpus" "$days" 30 35)"
echo "store: $(du -sb "$dir/store" | cut -f1) bytes in $(find "$dir/store/tiles" -name part.parquet | wc -l) day files"

last=$(date -u -d "2025-01-01 + $((days - 1)) days" +%Y-%m)
: > "$dir/review.times"
for _ in $(seq "$runs"); do
  /usr/bin/time -f "%e %M" -o "$dir/t" $bin review --store "$dir/store" --month "$last" --history 11 \
    --cloud aws --format json -o "$dir/review.json" --no-progress 2>/dev/null
  cat "$dir/t" >> "$dir/review.times"
done
echo "review $last with 11 months before: $(cut -d' ' -f1 "$dir/review.times" | median) s, $(( $(cut -d' ' -f2 "$dir/review.times" | median) / 1024 )) MB peak"

if [[ ! -d "$dir/day" ]]; then
  $bin generate --out "$dir/day" --gpus "$gpus" --days 1 --interval 30s --format nvidia-smi \
    --start 2026-10-01 --yes > /dev/null
fi
: > "$dir/report.times"; : > "$dir/rollup.times"
for _ in $(seq "$runs"); do
  /usr/bin/time -f "%e %M" -o "$dir/t" $bin report "$dir/day" --format json -o /dev/null --no-progress 2>/dev/null
  cat "$dir/t" >> "$dir/report.times"
  rm -rf "$dir/daystore"
  /usr/bin/time -f "%e %M" -o "$dir/t" $bin rollup "$dir/day" --store "$dir/daystore" --no-progress > /dev/null 2>&1
  cat "$dir/t" >> "$dir/rollup.times"
done
for what in report rollup; do
  echo "$what (one day, $gpus GPUs at 30 s): $(cut -d' ' -f1 "$dir/$what.times" | median) s, $(( $(cut -d' ' -f2 "$dir/$what.times" | median) / 1024 )) MB peak"
done
