#!/usr/bin/env bash
# Run every fuzz target for SECONDS (default 20) on a seed corpus made from the repository's
# test data and the shared fixtures. Exits non-zero on a crash. Needs the nightly toolchain and
# cargo-fuzz; where they cannot be had it says why and exits 0 — except under CI (`CI=true`),
# where a fuzz step that did not fuzz is a failure, as a missing shared-data directory is.
set -uo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-20}"
unavailable() {
  if [[ "${CI:-}" == "true" ]]; then
    echo "fuzz: FAILED under CI: $1"; exit 1
  fi
  echo "fuzz: skipped: $1"; exit 0
}
if ! cargo +nightly --version >/dev/null 2>&1; then
  unavailable "no nightly toolchain (cargo-fuzz needs one)"
fi
if ! command -v cargo-fuzz >/dev/null 2>&1; then
  if ! cargo install cargo-fuzz --locked --quiet; then
    unavailable "cargo-fuzz could not be installed"
  fi
fi
shared="${GPUWISE_SHARED_DATA:-../shared/data}"
seed() {  # seed <target> <files…>
  local dir="fuzz/corpus/$1"; shift
  mkdir -p "$dir"
  for f in "$@"; do [[ -f "$f" ]] && head -c 65536 "$f" > "$dir/$(basename "$f")"; done
}
seed smi tests/data/smi/* tests/data/bad/*.csv "$shared"/fixtures/nvidia-smi/query-gpu-*.csv
seed dmon tests/data/bad/dmon-* "$shared"/fixtures/nvidia-smi/dmon-*.txt
seed dcgm tests/data/bad/*.prom "$shared"/fixtures/dcgm-exporter/*.prom "$shared"/telemetry/dcgm-exporter/*.txt
seed csv tests/data/csv/* tests/data/bad/*.csv
seed prometheus "$shared"/fixtures/prometheus/*.json
seed focus tests/data/bad/bills/* tests/data/bills/* "$shared"/fixtures/focus/*.csv
seed pack tests/data/bad/pack/*.csv "$shared"/packing/alibaba-gpu-v2023/openb_node_list_gpu_node.csv "$shared"/packing/alibaba-gpu-v2023/openb_pod_list_gpuspec25.csv "$shared"/jobs/microsoft-itp-2021/raw/cluster10.csv
seed inputs tests/data/bad/spot/* tests/data/bad/traffic/* tests/data/bad/jobs/* tests/data/plan/* "$shared"/spot/parcae-p3-32node/*.csv "$shared"/spot/skypilot-spot-traces/preemption/1-node/aws-04-22-2023/us-west-2a_v100_1.json
seed jobs tests/data/bad/slurm/*
seed history tests/data/bad/journal/*
mkdir -p fuzz/corpus/names
for n in node-a.csv.gz node.csv.1 node.csv-20260105.gz 10.0.0.1.csv "dcgm-2026-01-05T10:00:00Z.prom" "nœud-1767607200.prom"; do
  printf '%s' "$n" > "fuzz/corpus/names/$(printf '%s' "$n" | md5sum | cut -c1-12)"
done
# The build takes minutes on two cores: say what it is doing, one line per crate.
echo "fuzz: building the targets (sanitizer build of every reader)…"
if ! cargo +nightly fuzz build --release --debug-assertions 2>&1 | tee fuzz/build.log | grep --line-buffered -E '^ *(Compiling|Finished)' | sed -u 's/^ */fuzz: build: /'; then
  :
fi
if ! grep -q "Finished" fuzz/build.log; then
  tail -20 fuzz/build.log
  echo "fuzz: the targets do not build"; exit 1
fi
status=0
for t in smi dmon dcgm csv prometheus names focus pack inputs jobs history; do
  if cargo +nightly fuzz run --release --debug-assertions "$t" "fuzz/corpus/$t" -- -max_total_time="$seconds" -max_len=65536 >"fuzz/$t.log" 2>&1; then
    echo "fuzz: $t: $(grep -Eo 'Done [0-9]+ runs in [0-9]+ second' "fuzz/$t.log" | tail -1)s, no crash"
  else
    echo "fuzz: $t: CRASH (fuzz/artifacts/$t/):"; tail -30 "fuzz/$t.log"; status=1
  fi
done
exit $status
