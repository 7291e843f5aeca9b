#!/usr/bin/env bash
# The demo's outputs (report, report --advise, advise, plan, plan validate: JSON, and the
# report with advice as table, Markdown and HTML) into DIR, with
# the clock pinned: run before and after a refactor and diff, to show that nothing changed.
#   bench/demo-json.sh /tmp/before [path/to/gpuwise]
set -euo pipefail
DIR=${1:?usage: bench/demo-json.sh DIR [GPUWISE]}
B=${2:-target/release/gpuwise}
export GPUWISE_NOW=2026-12-01T00:00:00Z NO_COLOR=1
mkdir -p "$DIR"
"$B" demo --out "$DIR/demo" --format json > "$DIR/demo.json" 2>/dev/null
"$B" report "$DIR/demo/data" --format json > "$DIR/report.json" 2>/dev/null
"$B" report "$DIR/demo/data" --advise --format json > "$DIR/report-advise.json" 2>/dev/null
"$B" advise "$DIR/demo/data" --format json > "$DIR/advise.json" 2>/dev/null
"$B" advise "$DIR/demo/data" --format markdown > "$DIR/advise.md" 2>/dev/null
"$B" report "$DIR/demo/data" --format csv > "$DIR/report.csv" 2>/dev/null
"$B" report "$DIR/demo/data" --advise --format html > "$DIR/report-advise.html" 2>/dev/null
"$B" report "$DIR/demo/data" --advise --format markdown > "$DIR/report-advise.md" 2>/dev/null
"$B" report "$DIR/demo/data" --advise > "$DIR/report-advise.txt" 2>/dev/null
"$B" plan --model llama-3-70b --mode infer --precision int4 --batch 8 --context 8192 --format json > "$DIR/plan-infer.json" 2>/dev/null
"$B" plan --model llama-3.1-8b --mode train --tokens 2e9 --checkpointing full --format json > "$DIR/plan-train.json" 2>/dev/null
"$B" plan --params 13b --mode qlora --budget 500 --format json > "$DIR/plan-qlora.json" 2>/dev/null
SHARED=${GPUWISE_SHARED_DATA:-../shared/data}
if [ -f "$SHARED/planner-calibration.csv" ]; then
  "$B" plan validate "$SHARED/planner-calibration.csv" --format json > "$DIR/plan-validate.json" 2>/dev/null
fi
rm -rf "$DIR/demo"
(cd "$DIR" && sha256sum ./*.json ./*.md ./*.csv ./*.html ./*.txt)
