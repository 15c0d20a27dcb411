#!/usr/bin/env bash
# Builds networkqualityd (the network-quality project's Go RPM server, the
# reference server for the responsiveness draft) from its public source,
# as a peer for linerate's RPM client and to check goresponsiveness against
# a server that is not ours. Prints the binary's path.
#
# Usage: bench/nq_server.sh [DIR]     (default /tmp/linerate-peers)
# Source: $NQ_SERVER_SRC (a git repository: URL or local clone/mirror); by
# default the local mirror under /work/.mirror when there is one, else
# GitHub. The Go server used to live under go/server in
# network-quality/server; it moved to network-quality/goserver in 2023 (the
# old copy pins quic-go v0.33, which refuses Go 1.21+), so that is the
# source here. Needs Go (1.20 or newer) and its module proxy.
#
# Run with TLS + h2 on 127.0.0.1:PORT (without -public-name the config
# names networkquality.example.com):
#   networkqualityd -listen-addr 127.0.0.1 -public-name 127.0.0.1 \
#     -public-port PORT -cert-file CRT -key-file KEY
# config at https://127.0.0.1:PORT/.well-known/nq (also /config).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-/tmp/linerate-peers}
mkdir -p "$DIR"
if [ -d /work/.mirror/network-quality+goserver/repo ]; then
  NQ_SERVER_SRC=${NQ_SERVER_SRC:-/work/.mirror/network-quality+goserver/repo}
else
  NQ_SERVER_SRC=${NQ_SERVER_SRC:-https://github.com/network-quality/goserver}
fi
GO=$(command -v go || echo /usr/local/go/bin/go)
[ -x "$GO" ] || { echo "nq_server.sh: no Go toolchain (looked for go and $GO)" >&2; exit 1; }
SRC="$DIR/nq-goserver"
BIN="$SRC/networkqualityd"
if [ ! -x "$BIN" ]; then
  rm -rf "$SRC"
  git clone -q "$NQ_SERVER_SRC" "$SRC" >&2 ||
    { echo "nq_server.sh: cannot clone $NQ_SERVER_SRC" >&2; exit 1; }
  VER=$(git -C "$SRC" describe --always --long 2>/dev/null || echo dev)
  (cd "$SRC/cmd/networkqualityd" && "$GO" build -o "$BIN" \
    -ldflags "-X github.com/network-quality/goserver.GitVersion=$VER" . >&2) ||
    { echo "nq_server.sh: go build of networkqualityd failed" >&2; exit 1; }
fi
echo "$BIN"
