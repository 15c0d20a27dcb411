#!/usr/bin/env bash
# Side-by-side comparison with peers on loopback, interleaved A/B rounds.
# Usage: bench/compare.sh [ROUNDS] [SECONDS]   (run alone: nothing else busy)
# Needs iperf3, sockperf, qperf (scripts/test.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
SECS=${2:-5}
LR=./target/release/linerate
cargo build --release -q
out=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$out"' EXIT

py() { python3 -c "$@"; }

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, kernel $(uname -r)"
echo "rounds=$ROUNDS seconds=$SECS  (throughput Gbit/s; client CPU in core-seconds per GB moved)"

iperf3 -s -p 5299 -D --pidfile "$out/iperf3.pid" >/dev/null
sockperf sr --tcp -i 127.0.0.1 -p 11299 >/dev/null 2>&1 & SP=$!
qperf -lp 19765 >/dev/null 2>&1 & QP=$!
sleep 0.5

for r in $(seq 1 "$ROUNDS"); do
  # 1. single-flow stream, 128 KiB writes
  $LR run stream -m 128K -d "$SECS" --warmup 1 -q --json "$out/lr.json" >/dev/null
  py "import json;r=json.load(open('$out/lr.json'));s=r['summary'];it=r['iterations'][0];gb=it['bytes']/1e9;print('stream linerate %.2f Gbit/s  client %.3f core-s/GB'%(s['throughput_bps']/1e9, it['cpu']['client']['process_cpu_s']/gb))"
  iperf3 -c 127.0.0.1 -p 5299 -l 128K -t "$SECS" -O 1 -J > "$out/ip.json"
  py "import json;r=json.load(open('$out/ip.json'));e=r['end'];bps=e['sum_received']['bits_per_second'];c=e['cpu_utilization_percent']['host_total']/100;print('stream iperf3   %.2f Gbit/s  client %.3f core-s/GB'%(bps/1e9, c/(bps/8/1e9)))"
  # 2. rr 1/1, one flow, unpinned
  $LR run rr -d "$SECS" --warmup 1 -q --json "$out/rr.json" >/dev/null
  py "import json;r=json.load(open('$out/rr.json'));s=r['summary'];print('rr linerate %.0f tx/s  p50 %.1f us'%(s['transactions_per_s'], s['latency_us']['p50']))"
  sockperf pp --tcp -i 127.0.0.1 -p 11299 -t "$SECS" 2>&1 | py "
import sys,re
t=sys.stdin.read(); m=re.search(r'avg-latency=([0-9.]+)',t) or re.search(r'Latency is ([0-9.]+)',t)
rtt=2*float(m.group(1)); print('rr sockperf RTT %.1f us -> 1/RTT = %.0f tx/s'%(rtt, 1e6/rtt))"
  qperf 127.0.0.1 -lp 19765 -t "$SECS" -m 1 tcp_lat 2>&1 | py "
import sys,re
t=sys.stdin.read(); m=re.search(r'latency\s*=\s*([0-9.]+)\s*(us|ms|ns)',t)
v=float(m.group(1))*{'us':1,'ms':1000,'ns':0.001}[m.group(2)]; print('rr qperf RTT %.1f us -> 1/RTT = %.0f tx/s'%(2*v, 1e6/(2*v)))"
  # 3. many flows on 2 workers
  for f in 16 2000; do
    $LR run stream -F $f -T 2 -d "$SECS" --warmup 1 -q --json "$out/f.json" >/dev/null
    py "import json;r=json.load(open('$out/f.json'));print('flows %5d linerate %.2f Gbit/s'%($f, r['summary']['throughput_bps']/1e9))"
  done
done
kill $SP $QP 2>/dev/null || true
kill "$(cat "$out/iperf3.pid")" 2>/dev/null || true
