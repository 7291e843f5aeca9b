#!/usr/bin/env bash
# Run gpuwise's OCI image without a container engine: unpack it with umoci and run the binary
# in a chroot of its root file system as the image's user (no network namespace: the host's
# loopback reaches the server). Checks `--version`, `demo` and a `serve` health check, the
# image's user, entry point and labels; prints the image size and the server's cold start.
#
#   deploy/image/check.sh OCI_LAYOUT:TAG
#
# Needs root (chroot, umoci unpack). docs/deploy.md.
set -euo pipefail
image="$1"
layout="${image%%:*}"
work="$(mktemp -d)"
pid=""
cleanup() {
  if [[ -n "$pid" ]]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
umoci unpack --image "$image" "$work/bundle" >/dev/null
root="$work/bundle/rootfs"

# The runtime config umoci wrote from the image: user, entry point, labels.
python3 - "$work/bundle/config.json" "$layout" <<'PY'
import json, pathlib, sys
runtime = json.load(open(sys.argv[1]))
user = runtime["process"]["user"]
assert (user["uid"], user["gid"]) == (65532, 65532), user
assert runtime["process"]["args"][0] == "/usr/local/bin/gpuwise", runtime["process"]["args"]
layout = pathlib.Path(sys.argv[2])
index = json.load(open(layout / "index.json"))
digest = index["manifests"][0]["digest"].split(":")[1]
manifest = json.load(open(layout / "blobs" / "sha256" / digest))
config = json.load(open(layout / "blobs" / "sha256" / manifest["config"]["digest"].split(":")[1]))
labels = config["config"]["Labels"]
for key in ("org.opencontainers.image.source", "org.opencontainers.image.version", "org.opencontainers.image.licenses"):
    assert labels.get(key), f"label {key} missing: {labels}"
print(f"image config: user 65532, entry point gpuwise, version {labels['org.opencontainers.image.version']}, licence {labels['org.opencontainers.image.licenses']}")
PY

as_user() { chroot --userspec=65532:65532 "$root" "$@"; }
as_user /usr/local/bin/gpuwise --version
as_user /usr/local/bin/gpuwise demo --out /tmp/demo >"$work/demo.log" 2>&1 || { cat "$work/demo.log" >&2; exit 1; }
test -s "$root/tmp/demo/report.html"
echo "demo: report.html $(stat -c %s "$root/tmp/demo/report.html") bytes"
as_user /usr/local/bin/gpuwise generate --out /tmp/fleet --gpus 4 --days 1 --interval 5m --format nvidia-smi --seed 1 >/dev/null 2>&1

port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
start="$(date +%s.%N)"
chroot --userspec=65532:65532 "$root" /usr/local/bin/gpuwise serve /tmp/fleet --listen "127.0.0.1:$port" 2>"$work/serve.log" &
pid=$!
for _ in $(seq 1 300); do
  if body="$(python3 - "$port" <<'PY' 2>/dev/null
import sys, urllib.request
print(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/healthz", timeout=1).read().decode())
PY
)"; then
    ready="$(date +%s.%N)"
    echo "serve: /healthz answered after $(python3 -c "print(f'{$ready - $start:.2f}')") s: $body"
    exit 0
  fi
  sleep 0.1
done
echo "serve did not answer /healthz within 30 s:" >&2
cat "$work/serve.log" >&2
exit 1
