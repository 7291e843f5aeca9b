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

def curves(name):
    """Published mean curve per (list, policy): x → mean over seeds."""
    acc = {}
    for r in csv.DictReader(open(published / name)):
        key = (r["workload"], names[r["sc_policy"]])
        for x in range(131):
            if r.get(str(x)):
                acc.setdefault(key, {}).setdefault(x, []).append(float(r[str(x)]))
    return {k: {x: statistics.mean(v) for x, v in c.items()} for k, c in acc.items()}

pub_alloc, pub_frag = curves("analysis_allo_discrete.csv"), curves("analysis_frag_discrete.csv")
runs = {}
for f in out.glob("*.json"):
    list_, policy, _seed, _ = f.name.split(".")
    runs.setdefault((list_, policy), []).append(json.load(open(f)))

def ours(rs, field):
    acc = {}
    for r in rs:
        for p in r["curve"]:
            acc.setdefault(p["arrived_pct"], []).append(p[field])
    return {x: statistics.mean(v) for x, v in acc.items()}

def worst(mine, theirs):
    common = [x for x in theirs if x in mine]
    return max(abs(mine[x] - theirs[x]) for x in common) if common else float("nan")

print("| list | policy | allocation at 130 %: gpuwise | published | difference | fragmentation at 130 %: gpuwise | published | difference | curves, 0–130 %: largest difference (allocation / fragmentation) |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
order = list(names.values())
for (list_, policy), rs in sorted(runs.items(), key=lambda kv: (kv[0][0], order.index(kv[0][1]))):
    key = (list_, policy)
    a = [r["allocation_ratio_pct"] for r in rs]
    m, sd = statistics.mean(a), statistics.stdev(a)
    fm = statistics.mean(r["fragmentation_pct"] for r in rs)
    pm, ps = alloc.get(key, (float("nan"), float("nan")))
    pf = pub_frag.get(key, {}).get(130, float("nan"))
    wa = worst(ours(rs, "allocation_ratio_pct"), pub_alloc.get(key, {}))
    wf = worst(ours(rs, "fragmentation_pct"), pub_frag.get(key, {}))
    print(f"| {list_} | {policy} | {m:.2f} ± {sd:.2f} | {pm:.2f} ± {ps:.2f} | {m - pm:+.2f} | {fm:.2f} | {pf:.2f} | {fm - pf:+.2f} | {wa:.2f} / {wf:.2f} |")
PY
