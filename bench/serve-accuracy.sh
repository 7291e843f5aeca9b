#!/usr/bin/env bash
# `gpuwise simulate serve` against the serving throughput measurements in the planner's
# calibration file (../shared/data/planner-calibration.csv): offline scenarios (every request
# at 0 s) replayed on one replica; output tokens/s = output tokens ÷ the time to finish.
# Nothing here is fitted to these cases. Prints a Markdown table (docs/accuracy.md).
#
#   bench/serve-accuracy.sh [BIN]
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-target/release/gpuwise}"
if [[ ! -x "$bin" ]]; then cargo build --release --locked --quiet; fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
trace() { # name requests input output
  { echo "arrival_s,input_tokens,output_tokens"; for _ in $(seq 1 "$2"); do echo "0,$3,$4"; done; } >"$work/$1.csv"
}
rate() { # trace args… → output tokens/s
  local t="$1"; shift
  "$bin" simulate serve --trace "$work/$t.csv" "$@" --format json 2>/dev/null |
    python3 -c "import json,sys; r=json.load(sys.stdin); print(round(r['output_tokens']/r['duration_s']))"
}
row() { # id measured simulated setup
  python3 -c "m,s=$2,$3; print(f'| $1 | {m:,} | {s:,} | {100*(s/m-1):+.0f} % | $4 |')"
}
trace it07 3000 2048 128
trace it10 3840 128 128
trace it02 8960 1024 292
echo "| case | measured tokens/s | simulated | error | replayed as |"
echo "|---|---:|---:|---:|---|"
row IT-07 3450 "$(rate it07 --model llama-3.1-8b --precision fp8 --gpu H100-SXM5-80GB --max-batch 256)" \
  "3,000 × (2,048 in, 128 out), fp8, 1 × H100, continuous ≤ 256"
row IT-10 5586 "$(rate it10 --model llama-2-7b --precision fp16 --gpu A100-SXM4-80GB --max-batch 384 --batching static --batch-timeout 0s)" \
  "3,840 × (128, 128), fp16, 1 × A100-80GB, static 384"
row IT-02 5539 "$(rate it02 --model llama-2-70b --precision fp8 --kv-precision fp8 --tp 2 --gpu H100-SXM5-80GB --max-batch 896)" \
  "8,960 × (1,024, 292), fp8 weights and KV, tp 2 on H100, continuous ≤ 896"
# The development set's vLLM concurrency sweep (tests/data/plan/development.csv HO-72…HO-76): a client that
# keeps at most C requests in flight against a server that batches them all is the offline
# replay with at most C sequences in a batch. The 4090 has no catalog price: --price 1.
trace mistral 300 256 128
for c in 4:210:HO-72 8:377:HO-73 16:644:HO-74 32:975:HO-75 48:1190:HO-76; do
  IFS=: read -r n measured id <<<"$c"
  row "$id" "$measured" "$(rate mistral --model mistral-7b --precision bf16 --gpu GeForce-RTX-4090 --price 1 --max-batch "$n")" \
    "300 × (256, 128), bf16, 1 × RTX 4090, continuous ≤ $n (vLLM, at most $n in flight)"
done
