#!/usr/bin/env bash
# The cost of reading a fleet from a Prometheus-compatible store: pushdown against `--raw`
# against the same data as DCGM files, on Prometheus and on VictoriaMetrics, in one run.
#
#   bench/prometheus.sh                      # 200 GPUs × 7 days at 30 s (issue 20's size)
#   bench/prometheus.sh --gpus 24            # the 24-GPU week
#   bench/prometheus.sh --gpus 24 --no-raw   # skip --raw (it holds every sample in memory)
#
# Generates the fleet as OpenMetrics with `gpuwise generate --format openmetrics` (~50 MB per
# GPU-week at 30 s, under bench/out/, git-ignored), backfills it into Prometheus with
# `promtool tsdb create-blocks-from openmetrics` and imports it into VictoriaMetrics through
# `/api/v1/import/prometheus`, then writes the same fleet as DCGM files. Starts Debian's
# Prometheus and VictoriaMetrics on free loopback ports and times, on each engine,
# `gpuwise report --prometheus … --format json` twice (pushdown; the second run shows the
# store's caches) and once with `--raw`, and `gpuwise report` of the files; prints the points
# and bytes pulled against the raw samples in the window and the fleet's figures by each path.
# Needs prometheus, promtool and victoria-metrics (`apt-get install prometheus
# victoria-metrics`). Record results in BENCHMARKS.md with the date and machine.
set -euo pipefail
cd "$(dirname "$0")/.."
gpus=200 days=7 interval=30s raw=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --gpus) gpus="$2"; shift 2 ;;
    --days) days="$2"; shift 2 ;;
    --interval) interval="$2"; shift 2 ;;
    --no-raw) raw=0; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
for tool in prometheus promtool victoria-metrics; do
  command -v "$tool" >/dev/null || {
    echo "needs $tool: apt-get install prometheus victoria-metrics" >&2; exit 2; }
done
cargo build --release --locked --quiet
bin=$PWD/target/release/gpuwise
out="bench/out/prometheus-${gpus}x${days}d-${interval}"
rm -rf "$out" && mkdir -p "$out/tsdb" "$out/vm"
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT

echo "generating ${gpus} GPUs × ${days} days at ${interval} as OpenMetrics…" >&2
/usr/bin/time -f "generate: %e s" "$bin" generate --out "$out/om" --gpus "$gpus" --days "$days" \
  --interval "$interval" --format openmetrics --seed 7 --yes
ls -l "$out/om/fleet.om.txt" >&2
/usr/bin/time -f "promtool backfill: %e s" promtool tsdb create-blocks-from openmetrics \
  --max-block-duration=168h --quiet "$out/om/fleet.om.txt" "$out/tsdb"

vm_port=$(free_port)
victoria-metrics -storageDataPath="$out/vm" -httpListenAddr="127.0.0.1:$vm_port" \
  -retentionPeriod=100y -search.latencyOffset=0s -search.maxPointsPerTimeseries=1000000 \
  -search.maxSamplesPerQuery=2000000000 -search.maxQueryDuration=10m \
  > "$out/vm.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 120); do curl -fs "127.0.0.1:$vm_port/health" >/dev/null 2>&1 && break; sleep 0.5; done
/usr/bin/time -f "VictoriaMetrics import: %e s" curl -fsS -X POST -H 'Expect:' \
  -T "$out/om/fleet.om.txt" "127.0.0.1:$vm_port/api/v1/import/prometheus"
curl -fsS "127.0.0.1:$vm_port/internal/force_flush" >/dev/null
rm -f "$out/om/fleet.om.txt"

prom_port=$(free_port)
printf 'global:\n  scrape_interval: 1m\n' > "$out/prometheus.yml"
prometheus --storage.tsdb.path="$out/tsdb" --storage.tsdb.retention.time=100y \
  --web.listen-address="127.0.0.1:$prom_port" --config.file="$out/prometheus.yml" \
  --query.timeout=10m > "$out/prometheus.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 300); do
  curl -fs "127.0.0.1:$prom_port/-/ready" >/dev/null 2>&1 && break
  sleep 1
done
# VictoriaMetrics: every GPU searchable before timing.
until curl -fs "127.0.0.1:$vm_port/api/v1/series/count" | grep -q '"data":\[[1-9]'; do sleep 1; done

start=2026-01-05T00:00:00Z
end=$(python3 -c "import datetime as d; print((d.datetime(2026,1,5,tzinfo=d.timezone.utc)+d.timedelta(days=$days)).strftime('%Y-%m-%dT%H:%M:%SZ'))")
timed() { # name, then the command; wall seconds and peak RSS into $out/times
  local name=$1; shift
  /usr/bin/time -f "$name %e %M" -a -o "$out/times" "$@" > "$out/$name.json" 2> "$out/$name.err" \
    || { echo "$name failed: $(tail -3 "$out/$name.err")" >&2; rm -f "$out/$name.json"; }
}
: > "$out/times"
for engine in prometheus vm; do
  port=$prom_port; [[ $engine == vm ]] && port=$vm_port
  args=(report --prometheus "http://127.0.0.1:$port" --start "$start" --end "$end"
        --timeout 10m --format json --no-progress)
  timed "$engine-pushdown" "$bin" "${args[@]}" --path pushdown
  timed "$engine-pushdown-again" "$bin" "${args[@]}" --path pushdown
  if [[ $raw == 1 ]]; then timed "$engine-raw" "$bin" "${args[@]}" --path raw; fi
  timed "$engine-auto" "$bin" "${args[@]}"
done

echo "writing the same fleet as DCGM files…" >&2
"$bin" generate --out "$out/files" --gpus "$gpus" --days "$days" --interval "$interval" \
  --format dcgm --seed 7 --yes
rm -f "$out/files/truth.json"
timed files "$bin" report "$out"/files/* --format json --no-progress
rm -rf "$out/files"

python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
times = {}
for line in open(os.path.join(out, "times")):
    parts = line.split()
    if len(parts) == 3 and parts[0][0].isalpha():
        times[parts[0]] = (float(parts[1]), int(parts[2]))
def load(name):
    p = os.path.join(out, name + ".json")
    return json.load(open(p)) if os.path.exists(p) else None
files = load("files")
print("| path | wall s | peak RSS MB | requests | points pulled | share of raw | devices read raw | GPU-hours | idle h | held idle h |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for name in ["prometheus-pushdown", "prometheus-pushdown-again", "prometheus-raw", "prometheus-auto",
             "vm-pushdown", "vm-pushdown-again", "vm-raw", "vm-auto", "files"]:
    r = load(name)
    if r is None or name not in times:
        continue
    t, rss = times[name]
    fl = r["fleet"]
    p = r["ingest"].get("pulled") or {}
    pulled = p.get("samples")
    share = (f"{100 * pulled / p['raw_samples_in_window']:.2f} %"
             if pulled is not None and p.get("raw_samples_in_window") else "")
    print(f"| {name} | {t:.2f} | {rss / 1024:.0f} | {p.get('requests', '')} | "
          f"{pulled if pulled is not None else ''} | "
          f"{share} | {p.get('raw_devices', '')} | {fl['gpu_hours']:.1f} | {fl['idle_gpu_hours']:.2f} | "
          f"{fl['held_idle_gpu_hours']:.2f} |")
    if name.endswith("auto"):
        print(f"|  {name} chose `{p.get('mode')}`: {p.get('why')} | | | | | | | | | |")
if files:
    for engine in ["prometheus", "vm"]:
        r = load(engine + "-pushdown")
        if r is None or engine + "-pushdown" not in times:
            continue
        want = {d["id"]: d for d in files["devices"]}
        worst = {}
        for d in r["devices"]:
            w = want.get(d["id"])
            if w is None:
                continue
            for k in ["gpu_hours", "mean_utilization_pct", "idle_hours"]:
                a, b = d[k], w[k]
                if a is None or b is None:
                    continue
                rel = abs(a - b) / max(abs(b), 1e-9) if b else abs(a - b)
                worst[k] = max(worst.get(k, 0.0), rel)
        push = times[engine + "-pushdown"][0]
        speed = [f"{times[engine + '-raw'][0] / push:.1f}× faster than --raw"
                 for _ in [0] if engine + "-raw" in times]
        speed += [f"{push:.2f} s against {times['files'][0]:.2f} s for the files"
                  for _ in [0] if "files" in times]
        print(f"{engine}: {len(r['devices'])} devices (files {len(want)}); worst per-device "
              f"difference from the files: " + ", ".join(f"{k} {100 * v:.3f} %" for k, v in worst.items())
              + "; pushdown " + ", ".join(speed))
PY
