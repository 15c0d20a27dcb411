#!/usr/bin/env bash
# The linerate agent as a container image: one statically linked binary on
# an empty base, written as a docker-archive tarball (no registry, no image
# tool). Load it where the nodes can run it:
#   ctr -n k8s.io images import target/linerate-agent.tar   (containerd)
#   docker load -i target/linerate-agent.tar                (then push it)
# Usage: scripts/agent-image.sh [OUT.tar]   [default: target/linerate-agent.tar]
#   IMAGE=NAME:TAG   the image's name [default: linerate/agent:VERSION, the
#                    crate's version]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-target/linerate-agent.tar}
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
image=${IMAGE:-linerate/agent:$version}
host=$(rustc -vV | sed -n 's/^host: //p')
# glibc linked in: the base has no libc. A separate --target keeps the flag
# off build scripts and proc macros.
RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" \
  cargo build --release -q --target "$host" --bin linerate
bin=target/$host/release/linerate
# A dynamic executable names its loader (PT_INTERP).
if readelf -l "$bin" | grep -q INTERP; then
  echo "agent-image: $bin is not static" >&2
  exit 1
fi
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/tmp"
chmod 1777 "$root/tmp"
cp "$bin" "$root/linerate"
strip "$root/linerate"
scripts/image-tar.sh "$image" "$root" /linerate "$out"
echo "$out: $image ($(du -h "$out" | cut -f1))"
