#!/usr/bin/env bash
# Issue 12's design question, measured: one connected socket per UDP flow on
# the receiver (linerate's agent) against one shared socket that tells flows
# apart by linerate's header (a SO_REUSEPORT group of one). Same sender
# (sendmmsg, 32 x 64 B per flow in turn), same receiver loop (epoll +
# recvmmsg), one thread each, loopback, interleaved; then linerate itself at
# the same flow counts with one worker per end and with the default workers.
# Usage: bench/udp_demux.sh [ROUNDS] [SECONDS]      (run alone)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-2}
SECS=${2:-3}
cargo build --release -q --example udp_demux
cargo build --release -q
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, kernel $(uname -r)"
echo "# mode flows received/s receiver_us_per_packet drop_pct"
for r in $(seq 1 "$ROUNDS"); do
  for f in 1 10 100 1000; do
    for m in per-flow shared; do
      ./target/release/examples/udp_demux "$m" "$f" "$SECS"
    done
  done
done
echo "# linerate udp-stream --message 64: flows workers received/s loss% client_us/p agent_us/p"
for f in 1 10 100 1000; do
  for t in 1 default; do
    w=(); [ "$t" = 1 ] && w=(-T 1)
    j=$(mktemp)
    ./target/release/linerate run udp-stream --message 64 --flows "$f" "${w[@]}" -d "$SECS" --warmup 1 -q --json "$j" >/dev/null
    python3 -c "
import json,sys;u=json.load(open('$j'))['summary']['udp']
print($f, '$t', round(u['packets_per_s']), round(u['loss_pct'],1), round(u['client_us_per_packet'],3), round(u['agent_us_per_packet'],3))"
    rm -f "$j"
  done
done
