#!/usr/bin/env bash
# gpuwise serve on the demo fleet: time to the first dashboard after start (against one
# `gpuwise report` run on the same files, the reference), the server's memory, and the latency
# of each route, cached (the same window again) and cold (a window not asked before: tiles
# joined, report and advice built).
#
#   bench/serve.sh [BIN] [REQUESTS]     (BIN defaults to target/release/gpuwise, built if missing)
#
# Needs curl and python3. Prints a Markdown table for BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-target/release/gpuwise}"
n="${2:-200}"
if [[ ! -x "$bin" ]]; then cargo build --release --locked --quiet; fi
work="$(mktemp -d)"
server_pid=""
cleanup() {
  if [[ -n "$server_pid" ]]; then kill "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
export GPUWISE_NOW=2026-12-01T00:00:00Z NO_COLOR=1
"$bin" demo --out "$work/demo" >/dev/null 2>&1
data="$work/demo/data"
args=(--teams "$work/demo/teams.toml" --prices "$work/demo/prices.toml")

# One case: the reference report, the first dashboard, memory, and route latencies.
bench_case() {
  local label="$1" data="$2"; shift 2
  local args=("$@")
  cat "$data"/* >/dev/null # page cache, for both
  # Reference: one report run on the same files.
  t0=$(date +%s.%N)
  "$bin" report "$data" "${args[@]}" --format json --no-progress >/dev/null 2>&1
  t1=$(date +%s.%N)
  report_s=$(python3 -c "print(f'{$t1-$t0:.2f}')")

  # Start the server; poll / until it answers 200.
  t0=$(date +%s.%N)
  "$bin" serve "$data" "${args[@]}" --listen 127.0.0.1:0 2>"$work/err" &
  server_pid=$!
  addr=""
  for _ in $(seq 1 600); do
    addr=$(grep -o 'serving http://[0-9.:]*' "$work/err" | sed 's|serving http://||' || true)
    [[ -n "$addr" ]] && break
    sleep 0.02
  done
  [[ -n "$addr" ]] || { cat "$work/err"; exit 1; }
  until [[ "$(curl -s -o /dev/null -w '%{http_code}' "http://$addr/")" == 200 ]]; do sleep 0.02; done
  t1=$(date +%s.%N)
  first_s=$(python3 -c "print(f'{$t1-$t0:.2f}')")
  rss_mb=$(awk '/VmRSS/ {printf "%.0f", $2/1024}' "/proc/$server_pid/status")

  # Latency of N requests of one URL (ms): p50, p99.
  lat() {
    for _ in $(seq 1 "$n"); do curl -s -o /dev/null -w '%{time_total}\n' "$1"; done |
      python3 -c "import sys,statistics as s; v=sorted(float(x)*1000 for x in sys.stdin); print(f'{v[len(v)//2]:.1f} | {v[int(len(v)*0.99)-1]:.1f}')"
  }
  # Cold: each request a window not asked before (one day, then two, … of the week; each once).
  cold() {
    for d in 05 06 07 08 09 10 11; do
      for e in 05 06 07 08 09 10 11; do
        [[ "$e" < "$d" ]] && continue
        curl -s -o /dev/null -w '%{time_total}\n' "http://$addr/api/report?start=2026-01-$d&end=2026-01-$e"
      done
    done | python3 -c "import sys; v=sorted(float(x)*1000 for x in sys.stdin); print(f'{v[len(v)//2]:.1f} | {v[-1]:.1f} (max of {len(v)})')"
  }
  echo
  echo "### $label"
  echo
  echo "| measure | value |"
  echo "|---|---:|"
  echo "| \`gpuwise report\` on the same files (reference) | ${report_s} s |"
  echo "| \`gpuwise serve\`: start to the first dashboard (HTTP 200 on /) | ${first_s} s |"
  echo "| server RSS after the first dashboard | ${rss_mb} MB |"
  echo
  echo "| route ($n requests, ms) | p50 | p99 |"
  echo "|---|---:|---:|"
  echo "| /api/report (cached) | $(lat "http://$addr/api/report") |"
  echo "| /api/advice (cached) | $(lat "http://$addr/api/advice") |"
  echo "| / dashboard (cached) | $(lat "http://$addr/") |"
  echo "| /metrics (cached) | $(lat "http://$addr/metrics") |"
  echo "| /healthz | $(lat "http://$addr/healthz") |"
  echo "| /api/report, a new window each time (cold) | $(cold) |"

  kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=""
}

bench_case "demo fleet (52 GPUs, 7 days, 1.1M lines)" "$data" "${args[@]}"
if [[ "${BIG:-1}" == 1 ]]; then
  "$bin" generate --out "$work/big" --gpus 100 --days 30 --interval 1m --format nvidia-smi --seed 3 >/dev/null 2>&1
  rm -f "$work/big/truth.json"
  bench_case "generated fleet (100 GPUs, 30 days at 1 min, 4.3M samples)" "$work/big"
fi
