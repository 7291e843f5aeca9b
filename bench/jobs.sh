#!/usr/bin/env bash
# `gpuwise jobs` at the issue's scale: 100,000 Slurm jobs joined with a 1,000-GPU fleet-month
# (one sample a minute: 43.2M samples, nvidia-smi logs compressed with zstd), beside
# `gpuwise report` on the same files (the read alone). Alternating runs; median wall time and
# peak RSS (GNU time).
#
#   bench/jobs.sh [--runs N] [--dir DIR]
set -euo pipefail
runs=3
dir=bench/out/jobs
while [[ $# -gt 0 ]]; do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
cargo build --release --locked --quiet
bin=target/release/gpuwise
mkdir -p "$dir"
if [[ ! -d "$dir/fleet" ]]; then
  $bin generate --out "$dir/fleet" --gpus 1000 --days 30 --interval 1m --format nvidia-smi \
    --compress zstd --start 2026-10-01 --yes
fi
if [[ ! -s "$dir/sacct.txt" ]]; then
  python3 bench/jobs.py "$dir/fleet" 2026-10-01 30 100000 > "$dir/sacct.txt"
fi
echo "jobs: $(grep -vc '\.batch|' "$dir/sacct.txt") lines of sacct (steps besides), fleet: $(du -shL "$dir/fleet" | cut -f1) compressed"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
: > "$dir/report.times"; : > "$dir/jobs.times"
for _ in $(seq "$runs"); do
  /usr/bin/time -f "%e %M" -o "$dir/t" $bin report "$dir/fleet" --format json -o /dev/null --no-progress 2>/dev/null
  cat "$dir/t" >> "$dir/report.times"
  /usr/bin/time -f "%e %M" -o "$dir/t" $bin jobs "$dir/fleet" --sacct "$dir/sacct.txt" --format json -o "$dir/jobs.json" --no-progress 2>/dev/null
  cat "$dir/t" >> "$dir/jobs.times"
done
for what in report jobs; do
  s=$(cut -d' ' -f1 "$dir/$what.times" | median)
  m=$(cut -d' ' -f2 "$dir/$what.times" | median)
  echo "$what: median ${s} s, peak RSS $((m / 1024)) MB ($runs runs)"
done
python3 - "$dir/jobs.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
f = j["fleet"]
print(f"jobs {len(j['jobs'])}, observed {f['observed_gpu_hours']:.0f} GPU-h = report {f['report_gpu_hours']:.0f}, attributed {f['attributed_gpu_hours']:.0f}, unattributed {f['unattributed_gpu_hours']:.0f}")
PY
