#!/usr/bin/env bash
# Builds quinn's own QUIC perf tool (`quinn-perf server` / `quinn-perf
# client`, the perf protocol of draft-banks-quic-performance) from its
# public source, for interop with linerate's QUIC both ways and for the
# side-by-side QUIC benchmarks. Prints the binary's path.
#
# Usage: bench/quinn_perf.sh [DIR]     (default /tmp/linerate-peers)
# Source: $QUINN_SRC (a git repository: URL or local clone/mirror); by
# default the local mirror under /work/.mirror when there is one, else
# GitHub. Built without qlog (its extra dependency tree), with JSON output,
# and with TLS on aws-lc-rs instead of ring (its source names ring; the
# two lines are changed), so that it and linerate run the same crypto:
# QUINN_PERF_CRYPTO=ring keeps ring.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-/tmp/linerate-peers}
mkdir -p "$DIR"
if [ -d /work/.mirror/quinn-rs+quinn/repo ]; then
  QUINN_SRC=${QUINN_SRC:-/work/.mirror/quinn-rs+quinn/repo}
else
  QUINN_SRC=${QUINN_SRC:-https://github.com/quinn-rs/quinn}
fi
CRYPTO=${QUINN_PERF_CRYPTO:-aws-lc-rs}
SRC="$DIR/quinn-$CRYPTO"
BIN="$SRC/target/release/quinn-perf"
if [ ! -x "$BIN" ]; then
  rm -rf "$SRC"
  git clone -q "$QUINN_SRC" "$SRC"
  (
    cd "$SRC"
    if [ "$CRYPTO" = aws-lc-rs ]; then
      sed -i 's/rustls::crypto::ring::/rustls::crypto::aws_lc_rs::/' perf/src/lib.rs perf/src/client.rs perf/src/server.rs
      sed -i 's/^rustls = { workspace = true }/rustls = { workspace = true, features = ["aws_lc_rs"] }/' perf/Cargo.toml
      grep -q 'features = \["aws_lc_rs"\]' perf/Cargo.toml
    fi
    cargo build --release -q -p perf --no-default-features --features json-output
  )
fi
echo "$BIN"
