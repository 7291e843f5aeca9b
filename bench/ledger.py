"""gpuwise reconcile against DuckDB on the same FOCUS bill, same machine, same run.

    python3 bench/ledger.py --bin target/release/gpuwise --out bench/out [--rows 1000000] [--runs 3]

Writes a FOCUS 1.2 bill of --rows rows (hourly p4d.24xlarge charges of rows/1,000 instances
over 30 days, with storage rows and tags mixed in; CSV, and Parquet through DuckDB) and a
one-day telemetry fleet, then times `gpuwise reconcile` on each and DuckDB doing the part of
the work it can express in one query: read the bill and sum the GPU rows per resource. DuckDB
does no join with telemetry, no instance-type resolution and no per-hour comparison, so it is
a lower bound on the reading, not the same job. Both must agree on the billed total.
Prints a Markdown table of median wall time and peak RSS; record it in BENCHMARKS.md.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

DUCK = """
import sys, duckdb
con = duckdb.connect()
con.execute("SET threads TO 2")
con.execute("SET enable_progress_bar = false")  # it draws on stdout past a few seconds
src = sys.argv[1]
rel = f"read_parquet('{src}')" if src.endswith('.parquet') else f"read_csv('{src}', header=true)"
rows = con.execute(f'''
  select ResourceName, count(*), sum(BilledCost)
  from {rel}
  where ChargeCategory = 'Usage' and SkuPriceDetails like '%p4d.24xlarge%'
  group by ResourceName
''').fetchall()
print(sum(r[2] for r in rows))
"""


def write_bill(path, rows):
    """Hourly instance charges; every tenth row a storage row (not GPU compute)."""
    per_hour = 32.7726
    hours = 720
    start = 1767225600  # 2026-01-01T00:00:00Z
    header = ("BilledCost,BillingCurrency,ChargeCategory,ChargePeriodStart,ChargePeriodEnd,"
              "ConsumedQuantity,ConsumedUnit,EffectiveCost,ListCost,PricingCategory,ResourceId,"
              "ResourceName,ResourceType,ServiceCategory,SkuPriceDetails,Tags,InvoiceId\n")
    sku = '"{""InstanceType"":""p4d.24xlarge""}"'
    with open(path, "w") as f:
        f.write(header)
        n = 0
        h = 0
        while n < rows:
            t0 = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start + (h % hours) * 3600))
            t1 = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start + (h % hours + 1) * 3600))
            i = h // hours
            for r in range(1000):
                if n >= rows:
                    break
                name = f"host-{i * 1000 + r:06d}"
                tags = f'"{{""team"":""team-{r % 17}""}}"'
                if n % 10 == 9:
                    f.write(f"0.0100,USD,Usage,{t0},{t1},1,GB-Hours,0.01,0.01,Standard,vol-{n},{name},volume,Storage,,{tags},INV-1\n")
                else:
                    f.write(f"{per_hour:.4f},USD,Usage,{t0},{t1},1,Hours,{per_hour * 0.6:.4f},{per_hour:.4f},Standard,"
                            f"i-{i * 1000 + r:06d},{name},instance,Compute,{sku},{tags},INV-1\n")
                n += 1
            h += 1


def timed(cmd):
    t0 = time.perf_counter()
    r = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=True)
    wall = time.perf_counter() - t0
    rss_kb = int(r.stderr.decode().strip().splitlines()[-1])
    return wall, rss_kb / 1024.0, r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    csv = os.path.join(a.out, f"focus-{a.rows}.csv")
    if not os.path.exists(csv):
        write_bill(csv, a.rows)
    pq = csv[:-4] + ".parquet"
    if not os.path.exists(pq):
        import duckdb
        duckdb.connect().execute(
            f"copy (select * from read_csv('{csv}', header=true)) to '{pq}' (format parquet, compression snappy)")
    fleet = os.path.join(a.out, "ledger-fleet")
    if not os.path.exists(fleet):
        subprocess.run([a.bin, "generate", "--out", fleet, "--gpus", "8", "--days", "1", "--format", "nvidia-smi",
                        "--start", "2026-01-01"], check=True, stderr=subprocess.DEVNULL)
        os.remove(os.path.join(fleet, "truth.json"))
    print(f"| input | gpuwise reconcile (s) | gpuwise peak RSS (MB) | DuckDB read + group (s) | DuckDB peak RSS (MB) |")
    print("|---|---:|---:|---:|---:|")
    for src in (csv, pq):
        g, d = [], []
        for _ in range(a.runs):
            w, r, out = timed([a.bin, "reconcile", "--bill", src, fleet, "--format", "json", "--no-progress"])
            g.append((w, r))
            billed = json.loads(out)["billed_cost_usd"]
            w, r, out = timed([sys.executable, "-c", DUCK, src])
            d.append((w, r))
            duck = float(out.decode().strip())
            assert abs(duck - billed) <= 1e-6 * billed, f"billed totals differ: {duck} vs {billed}"
        med = lambda xs, k: statistics.median(x[k] for x in xs)
        name = f"{a.rows:,} rows, {'Parquet' if src.endswith('.parquet') else 'CSV'} ({os.path.getsize(src) / 1e6:.0f} MB)"
        print(f"| {name} | {med(g, 0):.2f} | {med(g, 1):.0f} | {med(d, 0):.2f} | {med(d, 1):.0f} |")


if __name__ == "__main__":
    main()
