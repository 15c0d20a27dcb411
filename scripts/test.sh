#!/usr/bin/env bash
# The README's test command: installs what the tests and benchmarks need
# when missing, then runs formatting, lints and every test.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
for pkg_cmd in iproute2:ip iperf3:iperf3 sockperf:sockperf qperf:qperf; do
  pkg=${pkg_cmd%%:*}; cmd=${pkg_cmd##*:}
  command -v "$cmd" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing: ${need[*]}"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "note: missing ${need[*]} (only the benchmarks in bench/ use them)" >&2
  fi
fi

cargo fmt --check
cargo clippy --all-targets --all-features -- -D warnings
cargo test --release --all-features
