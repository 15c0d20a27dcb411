#!/usr/bin/env bash
# Builds goresponsiveness (the network-quality project's RPM client, the
# draft's Go implementation, `networkQuality`) from its public source, for
# interop with linerate's RPM server (`serve --rpm`) in tests/rpm.rs and
# for side-by-side RPM figures. Prints the binary's path.
#
# Usage: bench/goresponsiveness.sh [DIR]     (default /tmp/linerate-peers)
# Source: $GORESP_SRC (a git repository: URL or local clone/mirror); by
# default the local mirror under /work/.mirror when there is one, else
# GitHub. Needs Go (1.21 or newer) and its module proxy.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-/tmp/linerate-peers}
mkdir -p "$DIR"
if [ -d /work/.mirror/network-quality+goresponsiveness/repo ]; then
  GORESP_SRC=${GORESP_SRC:-/work/.mirror/network-quality+goresponsiveness/repo}
else
  GORESP_SRC=${GORESP_SRC:-https://github.com/network-quality/goresponsiveness}
fi
GO=$(command -v go || echo /usr/local/go/bin/go)
SRC="$DIR/goresponsiveness"
BIN="$SRC/networkQuality"
if [ ! -x "$BIN" ]; then
  rm -rf "$SRC"
  git clone -q "$GORESP_SRC" "$SRC"
  (cd "$SRC" && "$GO" build -o networkQuality . >&2)
fi
echo "$BIN"
