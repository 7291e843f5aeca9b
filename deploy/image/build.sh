#!/usr/bin/env bash
# Build gpuwise's container image without a registry or a container engine: a Debian
# bookworm root file system (mmdebstrap, the `essential` set plus CA certificates and tzdata,
# no docs, man pages or locales), the release binary at /usr/local/bin/gpuwise, a non-root
# user 65532, packed as an OCI image layout by umoci, with labels.
#
#   deploy/image/build.sh BINARY OUT_DIR [TAG]
#
# Writes OUT_DIR/oci (an OCI image layout: `skopeo copy oci:OUT_DIR/oci:TAG docker://…` pushes
# it) and prints its size. Needs root (mmdebstrap in root mode, umoci unpack/repack) and the
# Debian mirror. docs/deploy.md; run and checked in CI by deploy/image/check.sh.
set -euo pipefail
bin="$(realpath "$1")"
out="$2"
version="$("$bin" --version | awk '{print $2}')"
tag="${3:-$version}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
rm -rf "$out/oci"

mmdebstrap --quiet --variant=essential --include=ca-certificates,tzdata \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
  --customize-hook="copy-in $bin /usr/local/bin" \
  --customize-hook='chmod 0755 "$1/usr/local/bin/gpuwise"' \
  --customize-hook='echo "gpuwise:x:65532:65532:gpuwise:/nonexistent:/usr/sbin/nologin" >> "$1/etc/passwd"' \
  --customize-hook='echo "gpuwise:x:65532:" >> "$1/etc/group"' \
  --customize-hook='rm -rf "$1/var/cache/apt" "$1/var/lib/apt/lists"/* "$1/var/log"/*' \
  bookworm "$work/rootfs.tar"

umoci init --layout "$out/oci"
umoci new --image "$out/oci:$tag"
umoci unpack --image "$out/oci:$tag" "$work/bundle"
tar -xf "$work/rootfs.tar" -C "$work/bundle/rootfs"
umoci repack --image "$out/oci:$tag" "$work/bundle"
umoci config --image "$out/oci:$tag" \
  --config.user 65532:65532 \
  --config.entrypoint /usr/local/bin/gpuwise \
  --config.cmd --help \
  --config.env NO_COLOR=1 \
  --config.env PATH=/usr/local/bin:/usr/bin:/bin \
  --config.workingdir /tmp \
  --config.exposedports 8080/tcp \
  --config.exposedports 9400/tcp \
  --config.label "org.opencontainers.image.title=gpuwise" \
  --config.label "org.opencontainers.image.description=GPU cost optimizer: telemetry, prices, waste, advice, planning" \
  --config.label "org.opencontainers.image.source=https://github.com/gpuwise/gpuwise" \
  --config.label "org.opencontainers.image.version=$version" \
  --config.label "org.opencontainers.image.licenses=$(sed -n 's/^license = "\(.*\)"/\1/p' "$(dirname "$0")/../../Cargo.toml" | head -1)" \
  --config.label "org.opencontainers.image.base.name=debian:bookworm (mmdebstrap, essential)"
umoci gc --layout "$out/oci"
echo "image: $out/oci:$tag, $(du -sb "$out/oci" | awk '{printf "%.1f MB", $1 / 1e6}') (compressed layers)"
