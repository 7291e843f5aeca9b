#!/usr/bin/env python3
"""Check the deployment artefacts under deploy/ with the tools their platforms use.

    python3 deploy/check.py path/to/gpuwise

- Kubernetes: yamllint, then kubernetes-validate --strict against the 1.30 schemas (offline;
  the ServiceMonitor is a CRD it has no schema for), then what no schema checks: every
  Service selects a workload's pods and targets a port they name, the ServiceMonitor's
  endpoints name ports of the Services it selects, every Secret reference names the same
  Secret and key.
- systemd: `systemd-analyze verify` (no output allowed) and `systemd-analyze security
  --offline=true` (exposure at most 2.0 of 10) on the units, with ExecStart pointed at the
  binary given.
- Every `--flag` a manifest or unit passes exists in that subcommand's `--help`.

Exits 1 on the first kind of failure with what failed; prints the security scores.
"""
import pathlib
import re
import shlex
import subprocess
import sys
import tempfile

import yaml

HERE = pathlib.Path(__file__).resolve().parent
K8S = HERE / "kubernetes"
SYSTEMD = HERE / "systemd"
MAX_EXPOSURE = 2.0
failures = []


def fail(msg):
    failures.append(msg)
    print(f"FAIL {msg}", file=sys.stderr)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def docs():
    out = []
    for f in sorted(K8S.glob("*.yaml")):
        if f.name == "kustomization.yaml":
            continue
        for d in yaml.safe_load_all(f.read_text()):
            if d:
                out.append((f.name, d))
    return out


def check_kubernetes(bin_path):
    r = run([sys.executable, "-m", "yamllint", "-c", str(HERE / ".yamllint"), str(K8S)])
    if r.returncode != 0:
        fail(f"yamllint:\n{r.stdout}{r.stderr}")
    core = [
        str(K8S / f)
        for f in ("namespace.yaml", "record-daemonset.yaml", "serve-config.yaml", "serve-deployment.yaml", "serve-service.yaml")
    ]
    r = run(["kubernetes-validate", "--quiet", "--strict", "-k", "1.30.0", *core])
    if r.returncode != 0:
        fail(f"kubernetes-validate:\n{r.stdout}{r.stderr}")
    kust = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    listed = set(kust["resources"])
    present = {f.name for f in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    if listed != present:
        fail(f"kustomization.yaml lists {sorted(listed)}, the folder holds {sorted(present)}")
    all_docs = docs()
    workloads = [d for _, d in all_docs if d["kind"] in ("Deployment", "DaemonSet")]
    services = [d for _, d in all_docs if d["kind"] == "Service"]
    monitors = [d for _, d in all_docs if d["kind"] == "ServiceMonitor"]
    secret_refs = set()
    for w in workloads:
        pod = w["spec"]["template"]
        if w["spec"]["selector"]["matchLabels"].items() - pod["metadata"]["labels"].items():
            fail(f"{w['metadata']['name']}: its selector does not match its pods' labels")
        for c in pod["spec"].get("containers", []) + pod["spec"].get("initContainers", []):
            for e in c.get("env", []):
                ref = e.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    secret_refs.add((ref["name"], ref["key"]))
            args = c.get("args", [])
            if args:
                check_flags(bin_path, args[0], args[1:], f"{w['metadata']['name']}/{c['name']}")
    for s in services:
        sel = s["spec"]["selector"]
        targets = [w for w in workloads if not sel.items() - w["spec"]["template"]["metadata"]["labels"].items()]
        if not targets:
            fail(f"Service {s['metadata']['name']} selects no workload's pods")
        names = {p["name"] for w in targets for c in w["spec"]["template"]["spec"]["containers"] for p in c.get("ports", [])}
        for p in s["spec"]["ports"]:
            if p["targetPort"] not in names:
                fail(f"Service {s['metadata']['name']}: targetPort {p['targetPort']} is no port of its pods")
    for m in monitors:
        exprs = m["spec"]["selector"]["matchExpressions"]
        chosen = [s for s in services if all(s["metadata"]["labels"].get(e["key"]) in e["values"] for e in exprs)]
        ports = {p["name"] for s in chosen for p in s["spec"]["ports"]}
        for ep in m["spec"]["endpoints"]:
            if ep["port"] not in ports:
                fail(f"ServiceMonitor endpoint port {ep['port']} is no port of the Services it selects")
            cred = ep["authorization"]["credentials"]
            secret_refs.add((cred["name"], cred["key"]))
    for _, d in all_docs:
        if d["kind"] == "ConfigMap":
            check_config_map(bin_path, d)
    if len(secret_refs) != 1:
        fail(f"one Secret holds the token; these are referenced: {sorted(secret_refs)}")


def check_config_map(bin_path, cm):
    """The teams and policy files a ConfigMap carries are ones gpuwise reads: `check
    --emit-rules` parses the policy (and checks its numbers), `report` the team file."""
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in cm["data"].items():
            (pathlib.Path(tmp) / name).write_text(text)
        if "policy.toml" in cm["data"]:
            r = run([bin_path, "check", "--emit-rules", "--policy", str(pathlib.Path(tmp) / "policy.toml")])
            if r.returncode != 0:
                fail(f"ConfigMap {cm['metadata']['name']}: policy.toml: {r.stderr.strip()}")
        if "teams.toml" in cm["data"]:
            log = pathlib.Path(tmp) / "one.csv"
            log.write_text("timestamp,device,util\n2026-01-05T00:00:00Z,gpu0,50\n2026-01-05T00:01:00Z,gpu0,50\n")
            r = run([bin_path, "report", str(log), "--input-format", "csv", "--map", "timestamp=timestamp,device=device,util=util",
                     "--teams", str(pathlib.Path(tmp) / "teams.toml"), "--format", "json"])
            if r.returncode != 0:
                fail(f"ConfigMap {cm['metadata']['name']}: teams.toml: {r.stderr.strip()}")


def check_flags(bin_path, sub, args, where):
    r = run([bin_path, sub, "--help"])
    if r.returncode != 0:
        fail(f"{where}: `gpuwise {sub} --help` failed: {r.stderr}")
        return
    known = set(re.findall(r"--[a-z][a-z0-9-]*", r.stdout))
    for a in args:
        if a.startswith("--") and a.split("=", 1)[0] not in known:
            fail(f"{where}: `gpuwise {sub}` has no flag {a}")


def check_systemd(bin_path):
    with tempfile.TemporaryDirectory() as tmp:
        units = []
        for u in sorted(SYSTEMD.glob("*.service")):
            text = u.read_text().replace("/usr/local/bin/gpuwise", bin_path)
            (pathlib.Path(tmp) / u.name).write_text(text)
            units.append(u.name)
            for line in text.splitlines():
                if line.startswith("ExecStart="):
                    argv = shlex.split(line[len("ExecStart="):])
                    check_flags(bin_path, argv[1], argv[2:], u.name)
        r = run(["systemd-analyze", "verify", *units], cwd=tmp)
        if r.returncode != 0 or r.stdout.strip() or r.stderr.strip():
            fail(f"systemd-analyze verify:\n{r.stdout}{r.stderr}")
        for u in units:
            r = run(["systemd-analyze", "security", "--offline=true", "--no-pager", u], cwd=tmp)
            m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", r.stdout)
            if not m:
                fail(f"systemd-analyze security {u}: no score:\n{r.stdout}{r.stderr}")
                continue
            score = float(m.group(1))
            print(f"{u}: exposure {score} of 10")
            if score > MAX_EXPOSURE:
                fail(f"{u}: exposure {score} is above {MAX_EXPOSURE}")


def main():
    bin_path = str(pathlib.Path(sys.argv[1]).resolve())
    check_kubernetes(bin_path)
    check_systemd(bin_path)
    if failures:
        sys.exit(1)
    print("deploy: all checks passed")


if __name__ == "__main__":
    main()
