#!/usr/bin/env python3
"""`gpuwise serve` over a directory of per-scrape DCGM files, as README recommends collecting
them (one file per host and scrape): time to the first answer, a refresh that finds one new
scrape per host, and the server's memory.

    bench/serve-per-scrape.py --hosts 16 --hours 24          # 46,080 files
    bench/serve-per-scrape.py --hosts 16 --hours 168         # a week: 322,560 files
    bench/serve-per-scrape.py --bin /path/to/old/gpuwise ... # a baseline binary

Writes the files under bench/out/per-scrape-H-N/ (git-ignored; reused when present), each with
8 GPUs' dcgm-exporter lines (utilization, memory, power) at the scrape's millisecond timestamp.
Record results in BENCHMARKS.md with the date and machine.
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

T0 = 1_767_571_200_000  # 2026-01-05T00:00:00Z


def write_scrape(d, host, t_ms):
    lines = []
    for g in range(8):
        uuid = f"GPU-{host:08x}-0000-4000-8000-{g:012x}"
        labels = f'gpu="{g}",UUID="{uuid}",modelName="NVIDIA H100 80GB HBM3",Hostname="node-{host}"'
        util = (t_ms // 60_000 + g * 7 + host) % 100
        lines.append(f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} {util} {t_ms}")
        lines.append(f"DCGM_FI_DEV_FB_USED{{{labels}}} {20000 + util * 100} {t_ms}")
        lines.append(f"DCGM_FI_DEV_POWER_USAGE{{{labels}}} {100 + util * 5} {t_ms}")
    path = os.path.join(d, f"node-{host}-{t_ms}.prom")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def get(url, timeout=600):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=16)
    ap.add_argument("--hours", type=int, default=24)
    ap.add_argument("--interval-s", type=int, default=30)
    ap.add_argument("--bin", default="target/release/gpuwise")
    a = ap.parse_args()
    step = a.interval_s * 1000
    scrapes = a.hours * 3600 // a.interval_s
    d = f"bench/out/per-scrape-{a.hosts}-{scrapes}"
    if not os.path.isdir(d) or len(os.listdir(d)) != a.hosts * scrapes:
        os.makedirs(d, exist_ok=True)
        t = time.time()
        for k in range(scrapes):
            for h in range(a.hosts):
                write_scrape(d, h, T0 + k * step)
        print(f"wrote {a.hosts * scrapes} files in {time.time() - t:.1f} s", file=sys.stderr)
    files = len(os.listdir(d))
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    env = dict(os.environ, GPUWISE_NOW="2026-01-12T12:00:00Z")
    t = time.time()
    p = subprocess.Popen(
        [a.bin, "serve", d, "--refresh", "1s", "--listen", f"127.0.0.1:{port}"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for line in p.stderr:
            if "serving http://" in line:
                break
        started = time.time() - t
        t1 = time.time()
        report = json.loads(get(f"http://127.0.0.1:{port}/api/report"))
        first = time.time() - t1
        rss_first = rss_mb(p.pid)
        gen = json.loads(get(f"http://127.0.0.1:{port}/healthz"))["generation"]
        # One new scrape per host; the refresh that finds them.
        t2 = time.time()
        for h in range(a.hosts):
            write_scrape(d, h, T0 + scrapes * step)
        while json.loads(get(f"http://127.0.0.1:{port}/healthz"))["generation"] == gen:
            time.sleep(0.05)
        refresh = time.time() - t2
        rss_after = rss_mb(p.pid)
    finally:
        p.kill()
        p.wait()
        for h in range(a.hosts):
            try:
                os.remove(os.path.join(d, f"node-{h}-{T0 + scrapes * step}.prom"))
            except FileNotFoundError:
                pass
    print(
        json.dumps(
            {
                "binary": a.bin,
                "files": files,
                "devices": report["fleet"]["devices"],
                "gpu_hours": round(report["fleet"]["gpu_hours"], 3),
                "read_and_listen_s": round(started, 2),
                "first_answer_s": round(first, 2),
                "refresh_with_16_new_files_s": round(refresh, 2),
                "rss_mb_first": round(rss_first),
                "rss_mb_after_refresh": round(rss_after),
            }
        )
    )


if __name__ == "__main__":
    main()
