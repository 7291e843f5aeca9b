#!/usr/bin/env bash
# `gpuwise schedule --policy fifo` on an overloaded pool: 100,000 jobs (Poisson arrivals 30 s
# apart, 10 min–10 h, 1–8 GPUs, seed 1) on 64 GPUs. The queue grows to tens of thousands of
# jobs; FIFO must look at its head, not the whole queue, at every event.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-bench/out}"
mkdir -p "$out"
python3 - > "$out/jobs-100k.csv" <<'PY'
import random
random.seed(1)
print("job_id,submission_time,duration,num_gpu")
t = 0.0
for i in range(100000):
    t += random.expovariate(1 / 30)
    print(f"j{i},{t:.0f},{random.randint(600, 36000)},{random.choice([1, 1, 2, 4, 8])}")
PY
cargo build --release --quiet
/usr/bin/time -f "fifo, 100,000 jobs: %e s, %M KB peak" \
  ./target/release/gpuwise schedule "$out/jobs-100k.csv" --pool p=64@2 --policy fifo --format json \
  > "$out/schedule-fifo.json"
