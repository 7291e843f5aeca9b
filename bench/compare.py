"""Run gpuwise and DuckDB alternately on the same inputs; print median wall time and peak RSS.

DuckDB computes the per-device aggregates the report computes: mean, p95 and max utilization,
peak memory used, and samples under the idle threshold, with its default threads on the same
cores; the query is written three ways and the fastest is the baseline. gpuwise runs its whole
report (`--format json`): parsing, profiles, idle episodes, hour-of-week, diagnosis, prices.
Both read the same CSV from the page cache (one warm-up read first).
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

# DuckDB's per-device aggregate, written three ways. Every comparison is made against the
# fastest of them on that input ("the baseline at its best", issue 40); the others are
# printed too. nvidia-smi writes units into its values ("44 %", "13820 MiB"), so the two
# columns that matter are text to any CSV reader and their units are cut in SQL.
DUCK_VARIANTS = {
    # Every column read as text, cast afterwards (the first comparison's query).
    "all_varchar": "from read_csv(?, header = true, delim = ',', all_varchar = true)",
    # DuckDB's sniffer picks each column's type (what a user who types nothing gets).
    "sniffed": "from read_csv(?, header = true)",
    # The columns named and typed by hand: nothing to sniff, the numbers that carry no unit
    # read as numbers, the timestamp left as text (the aggregate does not need it).
    "typed": (
        "from read_csv(?, header = true, delim = ',', auto_detect = false, columns = {"
        "'timestamp': 'VARCHAR', 'name': 'VARCHAR', 'pci.bus_id': 'VARCHAR', 'uuid': 'VARCHAR', "
        "'index': 'INTEGER', 'utilization.gpu [%]': 'VARCHAR', 'utilization.memory [%]': 'VARCHAR', "
        "'memory.total [MiB]': 'VARCHAR', 'memory.used [MiB]': 'VARCHAR', 'power.draw [W]': 'VARCHAR', "
        "'enforced.power.limit [W]': 'VARCHAR'})"
    ),
}

DUCK = """
import duckdb, sys
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")
rows = con.execute('''
  select uuid, avg(util), quantile_cont(util, 0.95), max(util), max(mem),
         count(*) filter (where util < 5), count(*)
  from (
    select trim(uuid) as uuid,
           cast(nullif(replace(replace(trim("utilization.gpu [%]"), ' %', ''), '[N/A]', ''), '') as double) as util,
           cast(nullif(replace(trim("memory.used [MiB]"), ' MiB', ''), '') as double) as mem
    FROM_CLAUSE
  ) group by uuid
''', [sys.argv[1]]).fetchall()
print(len(rows))
"""


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def generate(bin_, out, days, fmt, name):
    path = os.path.join(out, name)
    if os.path.exists(path):
        return path
    tmp = os.path.join(out, name + ".parts")
    sh([bin_, "generate", "--out", tmp, "--gpus", "100", "--days", str(days), "--interval", "60s", "--format", fmt, "--seed", "7", "--yes"],
       stderr=subprocess.DEVNULL)
    parts = sorted(p for p in os.listdir(tmp) if p != "truth.json")
    with open(path, "wb") as o:
        for i, p in enumerate(parts):
            with open(os.path.join(tmp, p), "rb") as f:
                if fmt == "nvidia-smi" and i > 0:
                    f.readline()  # one header for the whole file
                while chunk := f.read(1 << 24):
                    o.write(chunk)
    for p in os.listdir(tmp):
        os.remove(os.path.join(tmp, p))
    os.rmdir(tmp)
    return path


def generate_dir(bin_, out, name, gpus, days, interval):
    """A directory of per-host nvidia-smi logs (the generator's layout: one file per host)."""
    path = os.path.join(out, name)
    if os.path.exists(path):
        return path
    sh([bin_, "generate", "--out", path, "--gpus", str(gpus), "--days", str(days), "--interval", interval,
        "--format", "nvidia-smi", "--seed", "7", "--yes"], stderr=subprocess.DEVNULL)
    os.remove(os.path.join(path, "truth.json"))
    return path


# `gpuwise allocate --format focus` against DuckDB grouping the same telemetry into the same
# rows: per host file, GPU and UTC day, GPU-hours (samples at one minute), busy GPU-hours
# (utilization-weighted), idle GPU-hours (utilization under 5 %), the team from the host's
# name, cost at one price. Typed columns, timestamps parsed by DuckDB.
DUCK_ALLOCATE = """
import duckdb, sys
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")
rows = con.execute('''
  select host, uuid, day,
         case when host like 'node00%' then 'research' else 'vision' end as team,
         count(*) / 60.0 as gpu_hours, sum(util) / 100.0 / 60.0 as busy_gpu_hours,
         count(*) filter (where util < 5) / 60.0 as idle_gpu_hours,
         count(*) / 60.0 * 6.88 as cost_usd
  from (
    select regexp_extract(filename, '([^/]+)[.]csv$', 1) as host, trim(uuid) as uuid,
           cast(strptime(timestamp, '%Y/%m/%d %H:%M:%S.%g') as date) as day,
           cast(nullif(replace(replace(trim("utilization.gpu [%]"), ' %', ''), '[N/A]', ''), '') as double) as util
    from read_csv(?, header = true, delim = ',', auto_detect = false, filename = true, columns = {
      'timestamp': 'VARCHAR', 'name': 'VARCHAR', 'pci.bus_id': 'VARCHAR', 'uuid': 'VARCHAR',
      'index': 'INTEGER', 'utilization.gpu [%]': 'VARCHAR', 'utilization.memory [%]': 'VARCHAR',
      'memory.total [MiB]': 'VARCHAR', 'memory.used [MiB]': 'VARCHAR', 'power.draw [W]': 'VARCHAR',
      'enforced.power.limit [W]': 'VARCHAR'})
  ) group by all
''', [sys.argv[1]]).fetchall()
print(len(rows))
"""

TEAMS = '[hosts]\n"node00*" = "research"\n"node01*" = "vision"\n'


def timed(cmd):
    """Wall seconds and peak RSS (MB) of a command, via GNU time."""
    t0 = time.perf_counter()
    r = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=True)
    wall = time.perf_counter() - t0
    rss_kb = int(r.stderr.decode().strip().splitlines()[-1])
    return wall, rss_kb / 1024.0, r.stdout


def measure(bin_, target, duck_input, runs):
    """gpuwise on `target` and, when `duck_input` is given, DuckDB's variants on it, alternately
    `runs` times: ([(wall, rss)] of gpuwise, [(wall, rss)] of DuckDB's fastest variant,
    gpuwise's last report); each variant's median is printed to stderr."""
    g, d = [], {v: [] for v in DUCK_VARIANTS}
    report = None
    for _ in range(runs):
        w, r, out = timed([bin_, "report", target, "--format", "json", "--no-progress"])
        g.append((w, r))
        report = json.loads(out)
        if duck_input is not None:
            for v, clause in DUCK_VARIANTS.items():
                w, r, out = timed([sys.executable, "-c", DUCK.replace("FROM_CLAUSE", clause), duck_input])
                d[v].append((w, r))
                assert int(out.decode().strip()) == report["fleet"]["devices"], f"{v}: both see the same devices"
    if duck_input is None:
        return g, [], report
    medians = {v: statistics.median(x[0] for x in runs_) for v, runs_ in d.items()}
    print("DuckDB variants (median s): " + ", ".join(f"{v} {m:.2f}" for v, m in medians.items()),
          file=sys.stderr)
    best = min(medians, key=medians.get)
    print(f"DuckDB at its best here: {best}", file=sys.stderr)
    return g, d[best], report


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sizes", default="1m,10m,many")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    env_note = f"{platform.node()} · {os.cpu_count()} cores · {platform.processor() or platform.machine()}"
    try:
        with open("/proc/cpuinfo") as f:
            model = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
        env_note = f"{model}, {os.cpu_count()} cores"
    except (OSError, StopIteration):
        pass
    print(f"machine: {env_note}; date: {time.strftime('%Y-%m-%d')}", file=sys.stderr)
    rows = []
    for size in a.sizes.split(","):
        if size == "shape":
            # Issue 40's held-out shape, written by bench/fleet_shape.py (not by gpuwise): 1,152
            # per-host logs of 8 GPUs, each host on its own clock and drifting, ms timestamps.
            d_ = os.path.join(a.out, "dir-shape")
            if not os.path.exists(d_):
                sh([sys.executable, os.path.join(os.path.dirname(__file__), "fleet_shape.py"), d_])
            files = sorted(os.listdir(d_))
            for p in files:
                with open(os.path.join(d_, p), "rb") as f:
                    while f.read(1 << 24):
                        pass
            g, d, report = measure(a.bin, d_, os.path.join(d_, "*.csv"), a.runs)
            name = (f"held-out shape: {len(files):,} nvidia-smi files, {report['fleet']['devices']:,} GPUs, "
                    f"{report['ingest']['samples']:,} samples, {sum(os.path.getsize(os.path.join(d_, p)) for p in files) / 1e9:.2f} GB")
            rows.append((name, statistics.median(x[0] for x in g), max(x[1] for x in g),
                         statistics.median(x[0] for x in d), max(x[1] for x in d)))
            continue
        if size == "shape-allocate":
            # The held-out shape again, through `allocate --format focus` (rows per GPU, team
            # and day), against DuckDB's grouping of the same files into the same rows.
            d_ = os.path.join(a.out, "dir-shape")
            if not os.path.exists(d_):
                sh([sys.executable, os.path.join(os.path.dirname(__file__), "fleet_shape.py"), d_])
            teams = os.path.join(a.out, "shape-teams.toml")
            with open(teams, "w") as f:
                f.write(TEAMS)
            g, d = [], []
            for _ in range(a.runs):
                w, r, out = timed([a.bin, "allocate", d_, "--teams", teams, "--format", "focus", "--no-progress"])
                g.append((w, r))
                ours = len(out.decode().splitlines()) - 1
                w, r, out = timed([sys.executable, "-c", DUCK_ALLOCATE, os.path.join(d_, "*.csv")])
                d.append((w, r))
                assert int(out.decode().strip()) == ours, f"rows: DuckDB {out.decode().strip()}, gpuwise {ours}"
            rows.append((f"held-out shape, `allocate --format focus`: {ours:,} rows (GPU × team × day)",
                         statistics.median(x[0] for x in g), max(x[1] for x in g),
                         statistics.median(x[0] for x in d), max(x[1] for x in d)))
            continue
        if size in ("many", "100k"):
            # many: 9,216 GPUs in 1,772 per-host files, 10M samples (DuckDB reads the glob).
            # 100k: 100,000 GPUs, one day at 10 minutes: the memory of per-device state.
            gpus, interval = (9216, "80s") if size == "many" else (100_000, "600s")
            d_ = generate_dir(a.bin, a.out, f"dir-{size}", gpus, 1, interval)
            files = sorted(os.listdir(d_))
            for p in files:
                with open(os.path.join(d_, p), "rb") as f:
                    while f.read(1 << 24):
                        pass
            g, d, report = measure(a.bin, d_, os.path.join(d_, "*.csv") if size == "many" else None, a.runs)
            gw = statistics.median(x[0] for x in g)
            name = (f"{len(files):,} nvidia-smi files, {report['fleet']['devices']:,} GPUs, "
                    f"{report['ingest']['samples']:,} samples, {sum(os.path.getsize(os.path.join(d_, p)) for p in files) / 1e9:.2f} GB")
            if d:
                rows.append((name, gw, max(x[1] for x in g), statistics.median(x[0] for x in d), max(x[1] for x in d)))
            else:
                rows.append((name, gw, max(x[1] for x in g), None, None))
            continue
        days = {"1m": 7, "10m": 70}[size]
        csv = generate(a.bin, a.out, days, "nvidia-smi", f"smi-{size}.csv")
        with open(csv, "rb") as f:  # warm the page cache
            while f.read(1 << 24):
                pass
        g, d, report = measure(a.bin, csv, csv, a.runs)
        gw = statistics.median(x[0] for x in g)
        dw = statistics.median(x[0] for x in d)
        rows.append((f"nvidia-smi CSV, {report['ingest']['samples']:,} samples, {os.path.getsize(csv) / 1e9:.2f} GB",
                     gw, max(x[1] for x in g), dw, max(x[1] for x in d)))
        if size == "1m":
            prom = generate(a.bin, a.out, days, "dcgm", "dcgm-1m.prom")
            g = [timed([a.bin, "report", prom, "--format", "json", "--no-progress"]) for _ in range(a.runs)]
            rows.append((f"DCGM scrape text, 1M samples, {os.path.getsize(prom) / 1e9:.2f} GB",
                         statistics.median(x[0] for x in g), max(x[1] for x in g), None, None))
    print("| input | gpuwise s | gpuwise peak RSS MB | DuckDB s | DuckDB peak RSS MB | DuckDB / gpuwise |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, gw, gr, dw, dr in rows:
        if dw is None:
            print(f"| {name} | {gw:.2f} | {gr:.0f} | – | – | – |")
        else:
            print(f"| {name} | {gw:.2f} | {gr:.0f} | {dw:.2f} | {dr:.0f} | {dw / gw:.2f}× |")


if __name__ == "__main__":
    main()
