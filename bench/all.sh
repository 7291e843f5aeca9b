#!/usr/bin/env bash
# Every comparison issue 40 asks for, in one run, each against its baseline on the same
# machine in the same run (record the tables in BENCHMARKS.md with the date and machine):
#
#   1. ingest: `gpuwise report` against DuckDB's per-device aggregate written three ways (the
#      fastest is the baseline) on one 10M-sample file, 1,772 generated per-host files, and the
#      held-out shape bench/fleet_shape.py writes (not gpuwise); 100,000 GPUs for memory;
#   2. bills: `gpuwise reconcile` against DuckDB reading and summing the same million-row FOCUS
#      bill, from CSV and from Parquet (bench/ledger.py);
#   3. Prometheus: pushdown against `--raw` at a small and a larger fleet, on Prometheus and
#      VictoriaMetrics (bench/prometheus.sh; skipped with a note when they are not installed);
#   4. the instruction counts CI's guard checks (bench/guard.sh; needs valgrind).
#
#   bench/all.sh             # everything (about 20 minutes, ~12 GB under bench/out/)
#   bench/all.sh --runs 5    # more alternating runs per comparison
set -euo pipefail
cd "$(dirname "$0")/.."
runs=3
[[ ${1:-} == --runs ]] && runs=$2
cargo build --release --locked --quiet
python3 -m pip install --quiet --disable-pip-version-check 'duckdb==2.0.1' 2>&1 | grep -v -i "running pip as the 'root' user" || true
bin=target/release/gpuwise
echo "## ingest" >&2
python3 bench/compare.py --bin "$bin" --out bench/out --sizes shape,shape-allocate,1m,10m,many,100k --runs "$runs"
echo "## bills" >&2
python3 bench/ledger.py --bin "$bin" --out bench/out --runs "$runs"
echo "## Prometheus: pushdown against --raw" >&2
if command -v prometheus >/dev/null && command -v promtool >/dev/null && command -v victoria-metrics >/dev/null; then
  bench/prometheus.sh --gpus 4 --days 1
  bench/prometheus.sh --gpus 24
else
  echo "skipped: prometheus, promtool and victoria-metrics are not all installed (apt-get install prometheus victoria-metrics)" >&2
fi
echo "## instruction counts (CI's guard)" >&2
bench/guard.sh
