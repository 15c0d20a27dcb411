#!/usr/bin/env bash
# Writes a one-layer container image as a docker-archive tarball, which
# `ctr images import`, `docker load` and `podman load` all take, with no
# registry and no image tool: the layer is ROOTFS as it is.
# Usage: scripts/image-tar.sh NAME:TAG ROOTFS ENTRYPOINT OUT.tar
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: $0 NAME:TAG ROOTFS ENTRYPOINT OUT.tar" >&2; exit 2; }
name=$1 rootfs=$2 entry=$3 out=$4
[ -d "$rootfs" ] || { echo "image-tar: $rootfs is not a directory" >&2; exit 1; }
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
# Owned by root, no timestamps from the build: the same input, the same image.
tar -C "$rootfs" --owner=0 --group=0 --numeric-owner --mtime=@0 --sort=name -cf "$d/layer.tar" .
diff=$(sha256sum "$d/layer.tar" | cut -d' ' -f1)
printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":["%s"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
  "$entry" "$diff" >"$d/config.json"
printf '[{"Config":"config.json","RepoTags":["%s"],"Layers":["layer.tar"]}]' "$name" >"$d/manifest.json"
tar -C "$d" --owner=0 --group=0 --mtime=@0 -cf "$out" config.json manifest.json layer.tar
