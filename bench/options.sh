#!/usr/bin/env bash
# Option sets of one linerate stream side by side with the newest iperf3, on
# loopback, interleaved: every round runs each set and iperf3 once, the
# order turned by one each round, so drift hits all alike. Prints each
# set's median, its ratio to iperf3's median, and every run. For a lever
# that is not the default yet (--io threads, --read-size, --rx-poll):
# whether it is worth making one, before any code changes.
#
# Usage: bench/options.sh [--cc NAME] ROUNDS "BASE" "SET|SET|..." "IPERF ARGS"
#   bench/options.sh --cc cubic 6 "stream -m 1M" " |--io threads" "-l 1M"
# (an empty set is the defaults; --cc as in compare.sh: root, put back at
# the end). Run alone: two cores shared with anything else mean nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
CC=""
if [ "${1:-}" = "--cc" ]; then CC=$2; shift 2; fi
if [ $# -ne 4 ]; then
  echo "usage: bench/options.sh [--cc NAME] ROUNDS \"BASE\" \"SET|SET|...\" \"IPERF ARGS\"" >&2
  exit 2
fi
ROUNDS=$1 BASE=$2 SETS=$3 IPERF_ARGS=$4
SECS=${SECS:-4}
LR=./target/release/linerate
cargo build --release -q
eval "$(bench/peers.sh --env)"
out=$(mktemp -d)
cc_before=$(sysctl -n net.ipv4.tcp_congestion_control)
cleanup() {
  kill "$(cat "$out/iperf3.pid" 2>/dev/null)" 2>/dev/null || true
  [ -n "$CC" ] && sysctl -qw net.ipv4.tcp_congestion_control="$cc_before"
  rm -rf "$out"
}
trap cleanup EXIT
if [ -n "$CC" ]; then
  if [ "$(id -u)" != 0 ]; then echo "--cc sets the host's default congestion control: run as root" >&2; exit 2; fi
  sysctl -qw net.ipv4.tcp_congestion_control="$CC"
fi
$IPERF3_NEW -s -p 5297 -D --pidfile "$out/iperf3.pid" >/dev/null
sleep 0.5

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, kernel $(uname -r)"
echo "congestion control: $(sysctl -n net.ipv4.tcp_congestion_control); linerate $(git rev-parse --short HEAD); rounds=$ROUNDS seconds=$SECS"
echo "linerate run $BASE [SET] against iperf3 3.21 $IPERF_ARGS"
IFS='|' read -ra sets <<<"$SETS"
n=$((${#sets[@]} + 1)) # the last slot is iperf3
for r in $(seq 1 "$ROUNDS"); do
  for k in $(seq 0 $((n - 1))); do
    i=$(((k + r) % n))
    if [ "$i" = $((n - 1)) ]; then
      # shellcheck disable=SC2086
      $IPERF3_NEW -c 127.0.0.1 -p 5297 $IPERF_ARGS -t "$SECS" -O 1 -J >"$out/i.json"
      g=$(python3 -c "import json; print(json.load(open('$out/i.json'))['end']['sum_received']['bits_per_second'])")
    else
      # shellcheck disable=SC2086
      $LR run $BASE ${sets[$i]} -d "$SECS" --warmup 1 -q --json "$out/lr.json" >/dev/null
      g=$(python3 -c "import json; print(json.load(open('$out/lr.json'))['summary']['throughput_bps'])")
    fi
    echo "$i $g" >>"$out/runs"
  done
done
python3 - "$SETS" "$out/runs" <<'PY'
import sys, statistics
names = [s.strip() or "(defaults)" for s in sys.argv[1].split("|")] + ["iperf3 3.21"]
runs = {}
for line in open(sys.argv[2]):
    i, g = line.split()
    runs.setdefault(int(i), []).append(float(g) / 1e9)
peer = statistics.median(runs[len(names) - 1])
for i, name in enumerate(names):
    m = statistics.median(runs[i])
    print(f"{name:<36} {m:7.2f} Gbit/s  / iperf3 {m / peer:.3f}   runs {' '.join(f'{g:.1f}' for g in runs[i])}")
PY
