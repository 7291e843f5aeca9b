#!/usr/bin/env bash
# Record a minute on a real NVIDIA GPU and read it back (the check behind docs/record.md):
# `gpuwise record` beside `nvidia-smi -l 1` for the same minute, a /metrics scrape, the
# recorder's CPU and memory, then a kill -9, a restart after it, and a SIGTERM.
#   OUT=/tmp/check GPUWISE=target/release/gpuwise bench/record-on-gpu.sh
set -u
B=${GPUWISE:-target/release/gpuwise}
OUT=${OUT:-/tmp/gpuwise-record-check}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
date -u; uname -srm; nproc
nvidia-smi -L
nvidia-smi --query-gpu=name,driver_version,mig.mode.current,power.limit,memory.total --format=csv
LOAD=none
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then LOAD=torch; fi
echo "load: $LOAD"

nvidia-smi --query-gpu=timestamp,name,uuid,utilization.gpu,memory.used,memory.total,power.draw \
  --format=csv -l 1 > "$OUT/nvidia-smi.csv" &
SMI=$!
"$B" record --out "$OUT/rec" --interval 1s --flush 5s --duration 60s --prometheus-listen 9400 &
REC=$!
sleep 10
if [ "$LOAD" = torch ]; then
  python3 - <<'EOF' &
import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
t = time.time()
while time.time() - t < 25:
    b = a @ a
torch.cuda.synchronize()
EOF
fi
sleep 20
python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:9400/metrics').read().decode(), end='')" > "$OUT/scrape.txt" \
  || curl -s http://127.0.0.1:9400/metrics > "$OUT/scrape.txt"
sleep 27
CLK=$(getconf CLK_TCK)
awk -v c="$CLK" '{print "recorder cpu seconds: user", $14/c, "sys", $15/c}' "/proc/$REC/stat"
grep -E 'VmHWM|VmRSS' "/proc/$REC/status"
wait $REC; echo "record exit $?"
kill $SMI; wait $SMI 2>/dev/null
"$B" report "$OUT/rec" --format json > "$OUT/report.json"; echo "report exit $?"
"$B" report "$OUT/rec" > "$OUT/report.txt"
"$B" report "$OUT/nvidia-smi.csv" --host smi --format json > "$OUT/report-smi.json"; echo "report smi exit $?"
ls -la "$OUT/rec" "$OUT/rec/processes"

"$B" record --out "$OUT/kill" --interval 500ms --flush 2s --no-processes &
K=$!
sleep 7; kill -9 $K; wait $K; echo "killed exit $?"
wc -l "$OUT/kill/"*.csv; tail -c 120 "$OUT/kill/"*.csv | od -c | tail -3
"$B" record --out "$OUT/kill" --interval 500ms --flush 2s --duration 3s --no-processes; echo "restart exit $?"
wc -l "$OUT/kill/"*.csv
"$B" record --out "$OUT/term" --interval 500ms --flush 1h --no-processes &
T=$!
sleep 4; kill -TERM $T; wait $T; echo "term exit $?"
wc -l "$OUT/term/"*.csv
"$B" report "$OUT/kill" "$OUT/term" > "$OUT/report-kill-term.txt"; echo "report exit $?"
