#!/usr/bin/env bash
# gpuwise against DuckDB on the same telemetry, same machine, same run.
#
#   bench/run.sh                 # 1M and 10M samples in one file, 10M in 1,772 files; 3 runs each
#   bench/run.sh --sizes 1m      # quicker
#   bench/run.sh --sizes 100k    # 100,000 GPUs (memory of per-device state; gpuwise only)
#   bench/run.sh --sizes shape   # issue 40's held-out shape (bench/fleet_shape.py): 1,152 hosts
#   bench/run.sh --runs 5
#
# Generates inputs with `gpuwise generate` (100 GPUs, 60 s samples: 7 days = 1M samples,
# 70 days = 10M) as one nvidia-smi CSV each, plus a DCGM scrape input of 1M samples, under
# bench/out/ (git-ignored; ~1.7 GB for 10M). Prints a Markdown table of median wall time and
# peak RSS; record results in BENCHMARKS.md with the date and machine.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --quiet
python3 -m pip install --quiet --disable-pip-version-check 'duckdb==2.0.1' 2>&1 | grep -v -i "running pip as the 'root' user" || true
exec python3 bench/compare.py --bin target/release/gpuwise --out bench/out "$@"
