#!/usr/bin/env bash
# CI's guard on speed. Wall time on a shared two-core machine moves by tens of percent from run
# to run; instruction counts do not (valgrind's callgrind, one thread, the same binary and
# inputs: the same count twice). Five small runs — `report` on an nvidia-smi log, `report` on
# DCGM scrapes, `jobs` joining Slurm records with the nvidia-smi fleet, `reconcile` of a
# 20,000-row FOCUS bill (bench/ledger.py's) against that fleet, as CSV and as Parquet written
# by DuckDB (the pinned 2.0.1 of .ci/run, as bench/ledger.py writes it) — are counted and
# compared with the counts recorded in bench/guard.txt. The baselines they are measured
# against in BENCHMARKS.md (DuckDB's queries) do not change between runs, so a ratio falls
# below 80 % of its recorded value exactly when its count grows by more than a quarter: then
# this fails, naming the run.
#
#   bench/guard.sh            # check against bench/guard.txt
#   bench/guard.sh --record   # write bench/guard.txt from this build (after a deliberate change)
set -euo pipefail
cd "$(dirname "$0")/.."
record=false
[[ ${1:-} == --record ]] && record=true
command -v valgrind >/dev/null || {
  if [[ "${CI:-}" == "true" ]]; then echo "guard: FAILED under CI: valgrind is not installed"; exit 1; fi
  echo "guard: skipped: valgrind is not installed"; exit 0
}
cargo build --release --locked --quiet
bin=target/release/gpuwise
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GPUWISE_NOW=2026-12-01T00:00:00Z RAYON_NUM_THREADS=1 NO_COLOR=1
"$bin" generate --out "$work/smi" --gpus 8 --days 2 --interval 60s --format nvidia-smi --seed 7 --yes 2>/dev/null
"$bin" generate --out "$work/dcgm" --gpus 4 --days 1 --interval 60s --format dcgm --seed 7 --yes 2>/dev/null
rm -f "$work/smi/truth.json" "$work/dcgm/truth.json"
python3 bench/jobs.py "$work/smi" 2026-01-05 2 400 > "$work/sacct.txt"
python3 -c 'import sys; sys.path.insert(0, "bench"); import ledger; ledger.write_bill(sys.argv[1], 20000)' "$work/bill.csv"
python3 -c 'import sys, duckdb; duckdb.connect().execute(f"copy (select * from read_csv({sys.argv[1]!r}, header=true)) to {sys.argv[2]!r} (format parquet, compression snappy)")' "$work/bill.csv" "$work/bill.parquet"
count() {  # count NAME ARGS…: the instructions of one run
  local name=$1; shift
  valgrind --tool=callgrind --callgrind-out-file="$work/$name.out" "$bin" "$@" \
    --no-progress -o /dev/null 2>&1 >/dev/null | grep -Eo 'refs: +[0-9,]+' | tr -dc '0-9'
}
declare -A now
now[report-smi]=$(count report-smi report "$work/smi" --format json)
now[report-dcgm]=$(count report-dcgm report "$work/dcgm" --format json)
now[jobs]=$(count jobs jobs "$work/smi" --sacct "$work/sacct.txt" --format json)
now[reconcile]=$(count reconcile reconcile --bill "$work/bill.csv" "$work/smi" --format json)
now[reconcile-parquet]=$(count reconcile-parquet reconcile --bill "$work/bill.parquet" "$work/smi" --format json)
if $record; then
  {
    echo "# Instructions per run (bench/guard.sh --record, $(date -u +%Y-%m-%d), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"
    for k in report-smi report-dcgm jobs reconcile reconcile-parquet; do echo "$k ${now[$k]}"; done
  } > bench/guard.txt
  cat bench/guard.txt
  exit 0
fi
status=0
while read -r name recorded; do
  [[ -z $name || $name == \#* ]] && continue
  got=${now[$name]:-}
  if [[ -z $got ]]; then echo "guard: $name: not counted"; status=1; continue; fi
  # The ratio against a fixed baseline moves as recorded/got.
  ratio=$(awk -v r="$recorded" -v g="$got" 'BEGIN { printf "%.3f", r / g }')
  if awk -v x="$ratio" 'BEGIN { exit !(x < 0.8) }'; then
    echo "guard: $name: $got instructions against $recorded recorded: the ratio is at $ratio of its recorded value (below 0.8) — FAILED"
    status=1
  else
    echo "guard: $name: $got instructions against $recorded recorded (ratio at $ratio of its recorded value)"
  fi
done < bench/guard.txt
exit $status
