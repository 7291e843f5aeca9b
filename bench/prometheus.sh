#!/usr/bin/env bash
# The cost of reading a fleet from Prometheus: pushdown against the raw samples.
#
#   bench/prometheus.sh                      # 200 GPUs × 7 days at 30 s (the issue's size)
#   bench/prometheus.sh --gpus 20 --days 2   # quicker
#
# Generates the fleet as OpenMetrics with `gpuwise generate --format openmetrics` (~10 GB for
# the default size, under bench/out/, git-ignored), backfills it with `promtool tsdb
# create-blocks-from openmetrics`, starts Debian's Prometheus on a free loopback port, runs
# `gpuwise report --prometheus … --format json`, and prints the points, bytes and time the
# pushdown pulled against the raw samples in the window (what `--raw` would move: every
# utilization sample once per DCGM metric present). Needs prometheus and promtool
# (`apt-get install prometheus`). Record results in BENCHMARKS.md with the date and machine.
set -euo pipefail
cd "$(dirname "$0")/.."
gpus=200 days=7 interval=30s
while [[ $# -gt 0 ]]; do
  case "$1" in
    --gpus) gpus="$2"; shift 2 ;;
    --days) days="$2"; shift 2 ;;
    --interval) interval="$2"; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
command -v prometheus >/dev/null && command -v promtool >/dev/null || {
  echo "needs prometheus and promtool: apt-get install prometheus" >&2; exit 2; }
cargo build --release --locked --quiet
bin=target/release/gpuwise
out="bench/out/prometheus-${gpus}x${days}d-${interval}"
rm -rf "$out" && mkdir -p "$out/tsdb"
echo "generating ${gpus} GPUs × ${days} days at ${interval} as OpenMetrics…" >&2
/usr/bin/time -f "generate: %e s" "$bin" generate --out "$out/om" --gpus "$gpus" --days "$days" \
  --interval "$interval" --format openmetrics --seed 7 --yes
ls -l "$out/om/fleet.om.txt" >&2
/usr/bin/time -f "promtool backfill: %e s" promtool tsdb create-blocks-from openmetrics \
  --max-block-duration=168h --quiet "$out/om/fleet.om.txt" "$out/tsdb"
rm -f "$out/om/fleet.om.txt"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
printf 'global:\n  scrape_interval: 1m\n' > "$out/prometheus.yml"
prometheus --storage.tsdb.path="$out/tsdb" --storage.tsdb.retention.time=100y \
  --web.listen-address="127.0.0.1:$port" --config.file="$out/prometheus.yml" \
  --query.timeout=10m > "$out/prometheus.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do
  curl -fs "127.0.0.1:$port/-/ready" >/dev/null 2>&1 && break
  sleep 1
done
end=$(python3 -c "import datetime as d; print((d.datetime(2026,1,5,tzinfo=d.timezone.utc)+d.timedelta(days=$days)).strftime('%Y-%m-%dT%H:%M:%SZ'))")
/usr/bin/time -f "pushdown report: %e s, %M KB peak RSS" "$bin" report --prometheus "http://127.0.0.1:$port" \
  --start 2026-01-05T00:00:00Z --end "$end" --timeout 10m --format json --no-progress \
  > "$out/report.json"
python3 - "$out/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
p = r["ingest"]["pulled"]
raw = p["raw_samples_in_window"]
print(f"devices {r['fleet']['devices']}, GPU-hours {r['fleet']['gpu_hours']:.0f}")
print(f"pushdown pulled {p['samples']} points ({p['series']} series, {p['requests']} requests, "
      f"{p['bytes']/1e6:.1f} MB) vs {raw} raw samples in the window: {100*p['samples']/raw:.2f} %")
PY
