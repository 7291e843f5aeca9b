#!/usr/bin/env python3
"""Write `sacct --parsable2` output for a generated fleet (`gpuwise generate`): about JOBS jobs
over its hosts and days, each on 1 to all of its host's GPUs, overlapping, with the states,
array tasks and steps a real cluster prints. Used by bench/jobs.sh.

    bench/jobs.py FLEET_DIR START_DAY DAYS JOBS > jobs.txt
"""
import datetime as dt
import io
import os
import random
import subprocess
import sys

fleet, start_day, days, target = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(7)
start = dt.datetime.fromisoformat(start_day)
end = start + dt.timedelta(days=days)
hosts = {}
for name in sorted(os.listdir(fleet)):
    if not name.endswith((".csv", ".csv.zst", ".csv.gz")):
        continue
    host = name.split(".csv")[0]
    cat = ["zstd", "-dc"] if name.endswith(".zst") else ["zcat"] if name.endswith(".gz") else ["cat"]
    head = subprocess.run(cat + [os.path.join(fleet, name)], capture_output=True).stdout[:65536]
    lines = io.StringIO(head.decode(errors="replace")).read().splitlines()[1:]
    first = lines[0].split(",")[0] if lines else ""
    hosts[host] = sum(1 for l in lines if l.split(",")[0] == first)
per_host = max(1, target // max(1, len(hosts)))
span = (end - start).total_seconds()
states = ["COMPLETED"] * 7 + ["FAILED", "CANCELLED by 1001", "TIMEOUT", "OUT_OF_MEMORY", "PREEMPTED", "NODE_FAIL"]
fmt = "%Y-%m-%dT%H:%M:%S"
print("JobID|JobIDRaw|JobName|User|Account|Partition|QOS|Submit|Start|End|Elapsed|Timelimit|State|ExitCode|AllocTRES|NodeList")
jid = 1000
for host, gpus in hosts.items():
    for _ in range(per_host):
        jid += 1
        s = start + dt.timedelta(seconds=rng.uniform(0, span))
        dur = dt.timedelta(minutes=rng.uniform(5, 240))
        e = min(s + dur, end)
        k = rng.randint(1, max(1, gpus))
        st = rng.choice(states)
        user = f"u{rng.randint(1, 60)}"
        acct = f"team{rng.randint(1, 12)}"
        sub = s - dt.timedelta(minutes=rng.uniform(0, 90))
        ident = f"{jid}_{rng.randint(0, 9)}" if rng.random() < 0.1 else str(jid)
        el = int((e - s).total_seconds())
        print(f"{ident}|{jid}|job{jid}|{user}|{acct}|gpu|normal|{sub.strftime(fmt)}|{s.strftime(fmt)}|{e.strftime(fmt)}|"
              f"{el // 3600:02d}:{el % 3600 // 60:02d}:{el % 60:02d}|04:00:00|{st}|0:0|cpu={4 * k},gres/gpu={k},node=1|{host}")
        if rng.random() < 0.5:
            print(f"{jid}.batch|{jid}.batch|batch||{acct}||normal|{sub.strftime(fmt)}|{s.strftime(fmt)}|{e.strftime(fmt)}|00:00:00||{st}|0:0|cpu={4 * k},gres/gpu={k}|{host}")
