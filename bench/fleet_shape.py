"""Write a directory of per-host nvidia-smi logs shaped like a real collection, without gpuwise.

Issue 40's held-out shape: 1,152 hosts of 8 GPUs, one `nvidia-smi --query-gpu=... -l 60` log
per host, about 1,100 loops each (10.1M samples, ~1.3 GB). What makes it unlike the
generator's output (`gpuwise generate`, which writes every host on one clock, every line on
the whole second):

- each host starts at its own random second, and its loop drifts: a loop takes 60 s plus the
  query's own time (0.2-0.6 s, random), so intervals never divide the minute;
- each GPU's line carries its own timestamp with milliseconds, a few ms after the previous
  GPU's (nvidia-smi queries the boards one after another);
- utilization, memory and power follow each GPU's own pattern (idle stretches at 0 %, busy
  stretches with noise), power with two decimals.

Written by this script, not by the code under test, so the reader meets timestamps and phases
it did not produce. Deterministic for a seed. Usage:

    python3 bench/fleet_shape.py OUT_DIR [--hosts 1152] [--loops 1100] [--seed 40]
"""

import argparse
import datetime as dt
import os
import random

HEADER = ("timestamp, name, pci.bus_id, uuid, index, utilization.gpu [%], utilization.memory [%], "
          "memory.total [MiB], memory.used [MiB], power.draw [W], enforced.power.limit [W]\n")
MODELS = [("NVIDIA H100 80GB HBM3", 81559, 700.0), ("NVIDIA A100-SXM4-80GB", 81920, 400.0),
          ("NVIDIA L40S", 46068, 350.0), ("NVIDIA A10G", 23028, 300.0)]


def host(path, rng, loops, start):
    name, total, limit = rng.choice(MODELS)
    gpus = []
    for i in range(8):
        uuid = "GPU-%08x-%04x-%04x-%04x-%012x" % (rng.getrandbits(32), rng.getrandbits(16), rng.getrandbits(16),
                                                  rng.getrandbits(16), rng.getrandbits(48))
        # A GPU is busy a share of its loops, in stretches; the share differs by GPU.
        gpus.append({"uuid": uuid, "bus": "00000000:%02X:00.0" % (0x10 + i), "busy_share": rng.random(),
                     "busy": rng.random() < 0.5, "mem": rng.uniform(0.05, 0.9) * total})
    t = start
    lines = [HEADER]
    for _ in range(loops):
        q = t
        for i, g in enumerate(gpus):
            if rng.random() < 0.02:  # a stretch ends
                g["busy"] = rng.random() < g["busy_share"]
            if g["busy"]:
                util = min(100, max(1, int(rng.gauss(75, 15))))
                mem_util = util // 3
                used = g["mem"]
                power = limit * (0.35 + 0.6 * util / 100) + rng.uniform(-5, 5)
            else:
                util, mem_util = 0, 0
                used = g["mem"] if rng.random() < 0.5 else 1.0
                power = limit * 0.15 + rng.uniform(-2, 2)
            stamp = q.strftime("%Y/%m/%d %H:%M:%S.") + "%03d" % (q.microsecond // 1000)
            lines.append(f"{stamp}, {name}, {g['bus']}, {g['uuid']}, {i}, {util} %, {mem_util} %, {total} MiB, "
                         f"{int(used)} MiB, {power:.2f} W, {limit:.2f} W\n")
            q += dt.timedelta(milliseconds=rng.randint(2, 9))
        t += dt.timedelta(seconds=60, milliseconds=rng.randint(200, 600))
    with open(path, "w") as f:
        f.writelines(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--hosts", type=int, default=1152)
    ap.add_argument("--loops", type=int, default=1100)
    ap.add_argument("--seed", type=int, default=40)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    tmp = a.out + ".parts"
    os.makedirs(tmp, exist_ok=True)
    base = dt.datetime(2026, 3, 2, 0, 0, 0)
    for h in range(a.hosts):
        start = base + dt.timedelta(seconds=rng.randint(0, 3599), milliseconds=rng.randint(0, 999))
        host(os.path.join(tmp, f"node{h:04d}.csv"), rng, a.loops, start)
    os.rename(tmp, a.out)


if __name__ == "__main__":
    main()
