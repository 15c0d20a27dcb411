#!/usr/bin/env bash
# Open-loop pacing (issue 27's timerfd), run alone: rr 64/64 at a fixed
# offered rate on loopback, round by round: linerate now, linerate before
# the precise timer (OLD, a build of an earlier commit, e.g. from
# bench/ab.sh's worktrees), and sockperf under-load (--tcp --mps), under the
# host's default congestion control and under cubic (set host-wide for the
# run, put back after). Latency p50/p99 in µs: linerate's from the actual
# send and from the intended send (corrected); sockperf's is its RTT/2
# doubled back into a round trip.
# Usage: OLD=/path/to/old/linerate bench/openloop.sh [ROUNDS] [SECONDS] [RATE]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-2}
SECS=${2:-5}
RATE=${3:-20000}
LR=${LR:-./target/release/linerate}
OLD=${OLD:?set OLD to an earlier linerate binary}
[ "$LR" = ./target/release/linerate ] && cargo build --release -q
orig=$(sysctl -n net.ipv4.tcp_congestion_control)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
sockperf sr --tcp -i 127.0.0.1 -p "$PORT" >/dev/null 2>&1 &
SP=$!
trap 'kill $SP 2>/dev/null; sysctl -qw net.ipv4.tcp_congestion_control="$orig"' EXIT
sleep 0.5
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, kernel $(uname -r); rate $RATE/s, $SECS s, rounds $ROUNDS"
lr() { # BINARY -> "p50 p99 cp50 cp99 achieved"
  "$1" run rr --request 64 --response 64 --rate "$RATE" -d "$SECS" --warmup 1 -q --json /tmp/ol.json >/dev/null
  python3 -c "
import json; s=json.load(open('/tmp/ol.json'))['summary']
l=s['latency_us']; c=s.get('latency_corrected_us') or {}
print('%.1f %.1f %.1f %.1f %.0f' % (l['p50'], l['p99'], c.get('p50', float('nan')), c.get('p99', float('nan')), s['transactions_per_s']))"
}
sp() {
  sockperf ul --tcp -i 127.0.0.1 -p "$PORT" -m 64 --mps "$RATE" -t "$SECS" 2>&1 | python3 -c "
import sys,re; t=sys.stdin.read()
g=lambda p: 2*float(re.search(r'percentile %s\s*=\s*([0-9.]+)' % p, t).group(1))
m=re.search(r'ReceivedMessages=(\d+)', t)
print('%.1f %.1f - - %s' % (g('50.000'), g('99.000'), m.group(1) if m else '-'))"
}
for cc in "$orig" cubic; do
  sysctl -qw net.ipv4.tcp_congestion_control="$cc"
  echo "cc=$cc   (p50 p99 | corrected p50 p99 | achieved/s or messages)"
  for r in $(seq "$ROUNDS"); do
    echo "  round $r linerate now:    $(lr "$LR")"
    echo "  round $r linerate before: $(lr "$OLD")"
    echo "  round $r sockperf ul:     $(sp)"
  done
done
