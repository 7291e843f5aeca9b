#!/usr/bin/env python3
"""The walk of a command through the code's rooms, measured rather than read by hand.

Runs under valgrind's callgrind (a debug build: no inlining hides a call), then reads the
call graph: a *room* is a source file of the workspace, a *hop* a distinct call from one room
into another, a *climb* a hop into a room above the caller's. Rooms rank by the crate graph of
the tree the binary was built from (`cargo metadata`: a crate ranks one above the highest crate
it depends on); inside the binary, `main.rs` ranks above the command modules, which rank above
the rest (the settings layer and the edges): the settings layer calling a command is a climb,
as is a library crate calling back into the binary through a closure.

    bench/walk.py TREE BINARY OUT.json -- ARGS…       one command
    bench/walk.py TREE BINARY OUT.json --serve PATH -- ARGS…   `serve ARGS`, GET PATH once

Prints rooms, hops and climbs as JSON, each climb named and sorted by kind: *direct* (a
function of a higher room called by name: the settings layer calling a command), *closure* (a
closure handed down and called back: a progress counter, a row sink, the server's old analysis
function) and *trait* (generic code of a lower room calling a higher room's trait impl, such as
serde serialising a type).
"""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path


def ranks(tree: Path) -> dict:
    meta = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline"],
            cwd=tree, check=True, capture_output=True, text=True).stdout)
    deps = {p["name"]: [d["name"] for d in p["dependencies"]
                        if d["name"].startswith("gpuwise") and d.get("kind") != "dev"]
            for p in meta["packages"]}
    memo = {}

    def rank(c):
        if c not in memo:
            memo[c] = 1 + max((rank(d) for d in deps.get(c, [])), default=-1)
        return memo[c]

    return {c: rank(c) for c in deps}


def room_rank(path: str, crate_rank: dict):
    m = re.search(r"/crates/(gpuwise[a-z-]*)/src/(.*)$", path)
    if not m:
        return None
    crate, rel = m.group(1), m.group(2)
    r = crate_rank.get(crate)
    if r is None:
        return None
    if crate == "gpuwise":
        if rel == "main.rs":
            return (r, 2)
        if rel.startswith("commands/"):
            return (r, 1)
        return (r, 0)
    return (r, 0)


def parse(callgrind: Path):
    """(function → file) and the call edges (caller fn, callee fn)."""
    fn_file, edges = {}, set()
    fl = fn = cfn = cfl = None
    names = {}

    def name(kind, v):
        # --compress-strings=no writes names whole; keep the (id) form working too.
        m = re.match(r"\((\d+)\)(?: (.*))?$", v)
        if not m:
            return v
        key = (kind, m.group(1))
        if m.group(2) is not None:
            names[key] = m.group(2)
        return names.get(key, v)

    for line in callgrind.read_text(errors="replace").splitlines():
        if line.startswith("fl="):
            fl = name("fl", line[3:])
        elif line.startswith("fn="):
            fn = name("fn", line[3:])
            fn_file.setdefault(fn, fl)
        elif line.startswith(("cfl=", "cfi=")):
            cfl = name("fl", line[4:])
        elif line.startswith("cfn="):
            cfn = name("fn", line[4:])
            if cfl is not None:
                fn_file.setdefault(cfn, cfl)
        elif line.startswith("calls="):
            edges.add((fn, cfn))
            cfl = None
    return fn_file, edges


def workspace_edges(fn_file: dict, edges: set, crate_rank: dict, through: int = 2):
    """Calls from one workspace function to another, directly or through up to `through`
    closure-call shims of the standard library (`<Box<F> as Fn>::call`, `FnOnce::call_once`):
    how a boxed closure handed down is called back. (Other functions outside the workspace
    are not walked through: callgrind names a generic by its name alone, so its instances
    would join unrelated callers and callees.)"""
    callees = {}
    for a, b in edges:
        callees.setdefault(a, set()).add(b)
    ours = lambda f: fn_file.get(f) and room_rank(fn_file[f], crate_rank) is not None
    out = set()
    for a in callees:
        if not ours(a):
            continue
        frontier, seen = set(callees[a]), set()
        for _ in range(through + 1):
            nxt = set()
            for b in frontier - seen:
                seen.add(b)
                if ours(b):
                    out.add((a, b))
                elif "core::ops::function::Fn" in b:
                    nxt |= callees.get(b, set())
            frontier = nxt
    return out


def measure(tree: Path, callgrind: Path) -> dict:
    crate_rank = ranks(tree)
    fn_file, edges = parse(callgrind)
    rooms, hops, commands = set(), set(), set()
    climbs = {"direct": set(), "closure": set(), "trait": set()}
    short = lambda p: re.sub(r".*/crates/", "", p)
    ws = workspace_edges(fn_file, edges, crate_rank)
    # What a called-back closure leads to: the rooms it calls into, itself excluded.
    leads = {}
    for a, b in ws:
        if fn_file[a] != fn_file[b]:
            leads.setdefault(a, set()).add(short(fn_file[b]))
    for a, b in ws:
        fa, fb = fn_file[a], fn_file[b]
        # The global allocator's shims (declared in the binary) are not a call into a room.
        if b.startswith("__rustc::") or fb.endswith("/src/alloc.rs"):
            continue
        ra, rb = room_rank(fa, crate_rank), room_rank(fb, crate_rank)
        rooms.update([short(fa), short(fb)])
        if fa != fb:
            hops.add((short(fa), short(fb)))
            cmd = lambda f: "/src/commands/" in f and not f.endswith("/mod.rs")
            if cmd(fa) and cmd(fb):
                commands.add(f"{short(fa)} → {short(fb)}")
            if rb > ra:
                kind = ("closure" if "{{closure}}" in b
                        else "trait" if b.startswith("<") or "<impl " in b else "direct")
                to = ", ".join(sorted(leads.get(b, ()))) or "nothing else"
                climbs[kind].add(f"{short(fa)} → {short(fb)} ({b[:120]}; calls {to})")
    return {
        "rooms": len(rooms),
        "hops": len(hops),
        "climbs": {k: sorted(v) for k, v in climbs.items()},
        "command_to_command": sorted(commands),
        "room_list": sorted(rooms),
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    args = sys.argv[1:]
    tree, binary, out = Path(args[0]), args[1], Path(args[2])
    serve = None
    rest = args[3:]
    if rest and rest[0] == "--serve":
        serve, rest = rest[1], rest[2:]
    assert rest and rest[0] == "--", __doc__
    cmd = rest[1:]
    env = dict(os.environ, GPUWISE_NOW="2026-12-01T00:00:00Z", NO_COLOR="1")
    with tempfile.TemporaryDirectory() as d:
        cg = Path(d) / "callgrind.out"
        vg = ["valgrind", "--tool=callgrind", "--compress-strings=no",
              f"--callgrind-out-file={cg}", binary]
        if serve is None:
            subprocess.run(vg + cmd, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=False)
        else:
            port = free_port()
            p = subprocess.Popen(vg + ["serve"] + cmd + ["--listen", f"127.0.0.1:{port}"],
                                 env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.time() + 600
            while time.time() < deadline:
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5)
                    break
                except OSError:
                    time.sleep(1)
            urllib.request.urlopen(f"http://127.0.0.1:{port}{serve}", timeout=600).read()
            p.send_signal(signal.SIGINT)
            p.wait(timeout=600)
        result = measure(tree, cg)
    out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "room_list"},
                     indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
