#!/usr/bin/env bash
# Reproduce the FGD paper's allocation ratios at 130 % load (Weng et al., ATC'23, Fig. 9a and
# the authors' cached results) on the Alibaba 2023 lists: every list × six policies × ten seeds,
# the paper's protocol (--load 1.3 --shuffle), two runs at a time. Prints a Markdown table of
# our mean allocation ratio (± std) and fragmentation beside the published ones.
# Usage: bench/pack-fgd.sh [LIST_NAME...]
set -euo pipefail
cd "$(dirname "$0")/.."
data="${GPUWISE_SHARED_DATA:-../shared/data}/packing"
cargo build --release --quiet --locked
bin=target/release/gpuwise
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
lists=("$@")
if [[ ${#lists[@]} -eq 0 ]]; then
  for f in "$data"/alibaba-gpu-v2023/openb_pod_list_*.csv; do lists+=("$(basename "$f" .csv)"); done
fi
start=$(date +%s)
for list in "${lists[@]}"; do
  for policy in random dot-product gpu-clustering gpu-packing best-fit fgd; do
    for seed in 42 43 44 45 46 47 48 49 50 51; do
      echo "$list $policy $seed"
    done
  done
done | xargs -P 2 -L 1 bash -c '
  "$0" pack "'"$data"'/alibaba-gpu-v2023/$1.csv" --nodes "'"$data"'/alibaba-gpu-v2023/openb_node_list_gpu_node.csv" \
    --policy "$2" --load 1.3 --shuffle --seed "$3" --format json 2>/dev/null \
    > "'"$out"'/$1.$2.$3.json"' "$bin"
echo "runs: $(ls "$out" | wc -l), wall $(( $(date +%s) - start )) s on $(nproc) cores" >&2
python3 - "$out" "$data/fgd-simulator-results" <<'PY'
import csv, json, pathlib, statistics, sys
out, published = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
names = {"01-Random": "random", "02-DotProd": "dot-product", "03-GpuClustering": "gpu-clustering",
         "04-GpuPacking": "gpu-packing", "05-BestFit": "best-fit", "06-FGD": "fgd"}
alloc = {(r["workload"], names[r["sc_policy"]]): (float(r["gpu_alloc_pct_at_130_mean"]), float(r["std"]))
         for r in csv.DictReader(open(published / "alloc_at_130pct_summary.csv"))}
frag_runs = {}
for r in csv.DictReader(open(published / "analysis_frag_discrete.csv")):
    frag_runs.setdefault((r["workload"], names[r["sc_policy"]]), []).append(float(r["130"]))
runs = {}
for f in out.glob("*.json"):
    list_, policy, _seed, _ = f.name.split(".")
    d = json.load(open(f))
    runs.setdefault((list_, policy), []).append((d["allocation_ratio_pct"], d["fragmentation_pct"]))
print("| list | policy | allocation: gpuwise | published | difference | fragmentation: gpuwise | published | difference |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
for (list_, policy), v in sorted(runs.items(), key=lambda kv: (kv[0][0], list(names.values()).index(kv[0][1]))):
    a = [x[0] for x in v]
    fr = [x[1] for x in v]
    m, s = statistics.mean(a), statistics.stdev(a)
    fm = statistics.mean(fr)
    pm, ps = alloc.get((list_, policy), (float("nan"), float("nan")))
    pf = statistics.mean(frag_runs[(list_, policy)]) if (list_, policy) in frag_runs else float("nan")
    print(f"| {list_} | {policy} | {m:.2f} ± {s:.2f} | {pm:.2f} ± {ps:.2f} | {m - pm:+.2f} | {fm:.2f} | {pf:.2f} | {fm - pf:+.2f} |")
PY
