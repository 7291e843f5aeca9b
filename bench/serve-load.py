#!/usr/bin/env python3
"""gpuwise serve under bounded concurrent load: CLIENTS threads ask for 1,000 distinct windows
(cold: tiles joined, report, advice and allocation built) with the cached dashboard between
them, on a generated fleet of 100 GPUs x 30 days at one sample a minute, 6-hour tiles.
Prints latency percentiles per kind and the server's memory after the first 100 windows and
after all 1,000 (the answers kept are bounded: memory should stay flat).

    bench/serve-load.py [BIN] [CLIENTS]     (BIN defaults to target/release/gpuwise)

Needs only python3. Prints a Markdown table for BENCHMARKS.md.
"""
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

BIN = sys.argv[1] if len(sys.argv) > 1 else "target/release/gpuwise"
CLIENTS = int(sys.argv[2]) if len(sys.argv) > 2 else 32
ENV = dict(os.environ, GPUWISE_NOW="2026-03-01T00:00:00Z", NO_COLOR="1")


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p / 100))]


def main():
    work = tempfile.mkdtemp()
    fleet = os.path.join(work, "fleet")
    subprocess.run([BIN, "generate", "--out", fleet, "--gpus", "100", "--days", "30",
                    "--interval", "1m", "--format", "dcgm"], env=ENV, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.remove(os.path.join(fleet, "truth.json"))
    err = open(os.path.join(work, "err"), "w+")
    server = subprocess.Popen([BIN, "serve", fleet, "--tile", "6h", "--listen", "127.0.0.1:0"],
                              env=ENV, stdout=subprocess.DEVNULL, stderr=err)
    try:
        addr = None
        for _ in range(3000):
            err.seek(0)
            m = re.search(r"serving http://([0-9.:]+)/", err.read())
            if m:
                addr = m.group(1)
                break
            time.sleep(0.05)
        assert addr, "the server did not start"
        base = f"http://{addr}"
        urllib.request.urlopen(base + "/").read()  # the first dashboard

        def at(q):  # quarter-days from 2026-01-05
            day, hour = 5 + q // 4, (q % 4) * 6
            return f"2026-{1 + (day - 1) // 31:02}-{(day - 1) % 31 + 1:02}T{hour:02}:00:00Z"

        tiles = 120
        windows = [f"/api/report?start={at(a)}&end={at(a + n)}"
                   for n in range(1, tiles) for a in range(tiles - n)][:1000]
        lat = {"cold window": [], "dashboard (cached)": []}
        lock = threading.Lock()

        def client(paths):
            for i, p in enumerate(paths):
                asks = [("cold window", p)] + ([("dashboard (cached)", "/")] if i % 3 == 2 else [])
                for kind, path in asks:
                    t = time.perf_counter()
                    with urllib.request.urlopen(base + path) as r:
                        r.read()
                        assert r.status == 200
                    with lock:
                        lat[kind].append((time.perf_counter() - t) * 1000)

        def load(batch):
            per = -(-len(batch) // CLIENTS)
            ts = [threading.Thread(target=client, args=(batch[i:i + per],))
                  for i in range(0, len(batch), per)]
            t0 = time.perf_counter()
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            return time.perf_counter() - t0

        load(windows[:100])
        after_100 = rss_mib(server.pid)
        seconds = load(windows[100:])
        after_1000 = rss_mib(server.pid)
        print(f"{CLIENTS} clients, 1,000 distinct windows (the last 900 in {seconds:.1f} s)\n")
        print("| requests (ms) | n | p50 | p99 | max |")
        print("|---|---:|---:|---:|---:|")
        for kind, v in lat.items():
            print(f"| {kind} | {len(v)} | {pct(v, 50):.1f} | {pct(v, 99):.1f} | {max(v):.1f} |")
        print(f"\n| server RSS | MiB |\n|---|---:|\n| after 100 windows | {after_100:.0f} |"
              f"\n| after 1,000 windows | {after_1000:.0f} |")
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
