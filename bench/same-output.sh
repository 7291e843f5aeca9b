#!/usr/bin/env bash
# Every command's output with the clock pinned, into DIR, and their checksums: run with the
# binary before a refactor and after it, then `diff` the two listings (issue 34's proof that a
# change of structure changed no output). Needs ../shared/data (or $GPUWISE_SHARED_DATA).
#   bench/same-output.sh /tmp/before /tmp/old-gpuwise
#   bench/same-output.sh /tmp/after target/release/gpuwise && diff /tmp/before/SUMS /tmp/after/SUMS
set -euo pipefail
DIR=${1:?usage: bench/same-output.sh DIR [GPUWISE]}
B=$(realpath "${2:-target/release/gpuwise}")
S=$(realpath "${GPUWISE_SHARED_DATA:-../shared/data}")
T=$(realpath tests/data)
export GPUWISE_NOW=2026-12-01T00:00:00Z NO_COLOR=1
rm -rf "$DIR" && mkdir -p "$DIR/out" && cd "$DIR"
# One work folder for every run: file names land in the outputs.
W=${TMPDIR:-/tmp}/gpuwise-same-output
rm -rf "$W"
run() { # NAME ARGS… : stdout into out/NAME, the exit code beside it
  local name=$1; shift
  set +e; "$B" "$@" > "out/$name" 2> "work.err"; echo "exit $?" >> "out/$name"; set -e
}
"$B" demo --out "$W" --format json > out/demo.json 2>/dev/null
"$B" generate --out "$W/gen" --gpus 24 --days 3 --seed 7 --bill "$W/bill.csv" > /dev/null 2>&1
D=$W/data
cat > "$W/policy.toml" <<'TOML'
[budget]
monthly_usd = { research = 100, serving = 1000000 }
[notebooks]
max_held_idle_hours = 2
pods = ["notebooks-*"]
[stale]
max_age_hours = 24
TOML
for f in json csv markdown html table; do
  run "report.$f" report "$D" --format "$f" --no-progress
  run "report-advise.$f" report "$D" --advise --format "$f" --no-progress
done
run report-prices.json report "$D" --prices "$W/prices.toml" --teams "$W/teams.toml" --group-by team --format json --no-progress
for f in json markdown table; do run "advise.$f" advise "$D" --format "$f" --no-progress; done
for f in json csv table markdown focus; do run "allocate.$f" allocate "$D" --teams "$W/teams.toml" --format "$f" --no-progress; done
run allocate-chargeback.json allocate "$D" --teams "$W/teams.toml" --mode chargeback --idle proportional --format json --no-progress
run check.json check "$D" --teams "$W/teams.toml" --policy "$W/policy.toml" --format json --no-progress
run check.table check "$D" --teams "$W/teams.toml" --policy "$W/policy.toml" --no-progress
run check.markdown check "$D" --teams "$W/teams.toml" --policy "$W/policy.toml" --format markdown --no-progress
run check-rules.yml check "$D" --policy "$W/policy.toml" --emit-rules
for f in json table csv markdown; do run "reconcile.$f" reconcile --bill "$W/bill.csv" "$W/gen" --format "$f" --no-progress; done
run reconcile-parquet.json reconcile --bill "$T/bills/small.parquet" "$D" --format json --no-progress
run plan-infer.json plan --model llama-3-70b --mode infer --precision int4 --batch 8 --context 8192 --format json
run plan-train.json plan --model llama-3.1-8b --mode train --tokens 2e9 --checkpointing full --format json
run plan-qlora.table plan --params 13b --mode qlora --budget 500
for f in csv markdown table; do run "plan-infer.$f" plan --model llama-3-70b --mode infer --precision int4 --batch 8 --context 8192 --format "$f"; done
for f in table markdown; do run "plan-validate.$f" plan validate "$S/planner-calibration.csv" --format "$f"; done
run plan-validate.json plan validate "$S/planner-calibration.csv" --format json
run catalog-gpus.json catalog gpus --format json
run catalog-price.csv catalog price H100-SXM5-80GB --format csv
for f in table markdown html; do
  run "simulate-spot.$f" simulate spot --trace "$S/spot/skypilot-spot-traces/availability/1-node/aws-10-26-2022/us-west-2a_v100_1.json" --work-hours 48 --deadline-hours 60 --spot-price 0.92 --on-demand-price 3.06 --starts 40 --checkpoint-interval auto --checkpoint-cost 2m --format "$f"
done
run simulate-spot.json simulate spot --trace "$S/spot/skypilot-spot-traces/availability/1-node/aws-10-26-2022/us-west-2a_v100_1.json" --work-hours 48 --deadline-hours 60 --spot-price 0.92 --on-demand-price 3.06 --starts 40 --format json
for f in json table markdown html; do
  run "simulate-commit.$f" simulate commit "$D" --on-demand-price 4.1 --commit-1y-price 2.9 --commit-3y-price 1.9 --format "$f" --no-progress
done
head -301 "$S/inference/azure-llm-2023/AzureLLMInferenceTrace_conv.csv" > "$W/conv.csv"
run simulate-serve.json simulate serve --trace "$W/conv.csv" --model llama-2-7b --gpu H100-SXM5-80GB --price 3 --format json
for f in json table markdown html; do
  run "simulate-serve-sweep.$f" simulate serve --trace "$W/conv.csv" --model llama-2-7b --gpu H100-SXM5-80GB --price 3 --sweep --replicas 1,2 --slo-tpot-ms 60 --format "$f"
  run "simulate-serve.$f" simulate serve --trace "$W/conv.csv" --model llama-2-7b --gpu H100-SXM5-80GB --price 3 --format "$f"
done
for f in table markdown csv; do
  run "schedule.$f" schedule "$S/jobs/microsoft-itp-2021/with_deadlines/195job.csv" --pool reserved=64@1.8 --pool cloud=32@4.1 --policy edf --format "$f"
  run "pack.$f" pack "$S/packing/alibaba-gpu-v2023/openb_pod_list_gpushare40.csv" --nodes "$S/packing/alibaba-gpu-v2023/openb_node_list_gpu_node.csv" --policy fgd --format "$f"
done
"$B" report "$D" --format json > "$W/report.json" 2> /dev/null
for f in json table markdown; do run "pack-consolidate.$f" pack --consolidate "$W/report.json" --format "$f"; done
run schedule.json schedule "$S/jobs/microsoft-itp-2021/with_deadlines/195job.csv" --pool reserved=64@1.8 --pool cloud=32@4.1 --policy edf --format json
run pack.json pack "$S/packing/alibaba-gpu-v2023/openb_pod_list_gpushare40.csv" --nodes "$S/packing/alibaba-gpu-v2023/openb_node_list_gpu_node.csv" --policy fgd --format json
# serve: the API over the demo data, one port, the clock pinned.
PORT=$(( 20000 + RANDOM % 20000 ))
"$B" serve "$D" --listen "127.0.0.1:$PORT" --teams "$W/teams.toml" --policy "$W/policy.toml" 2> serve.err &
PID=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/healthz" > /dev/null && break; sleep 0.1; done
for path in api/report api/advice api/allocation "api/report?last=2d" "device?id=dev-l40s-1" metrics ""; do
  curl -s "http://127.0.0.1:$PORT/$path" > "out/serve-$(echo "$path" | tr -c "a-z0-9\n" -)" || true
done
kill "$PID"; wait "$PID" 2> /dev/null || true
# The dashboard says when it last looked at the files: the wall clock, not the pinned one.
sed -i -E 's/looked at [0-9-]+ [0-9:]+ UTC/looked at (time)/' out/serve-

(cd out && sha256sum ./* > ../SUMS)
cat SUMS
