#!/usr/bin/env bash
# Where the CPU goes while a 1-flow stream runs, linerate against iperf3:
# a system-wide cpu-clock profile (software event; no hardware counters
# here) in the middle of each run, reported by thread and by kernel symbol.
# Usage: bench/profile.sh [SIZE] [SECONDS]   (root; run alone)
set -euo pipefail
cd "$(dirname "$0")/.."
M=${1:-128K}
SECS=${2:-3}
LR=./target/release/linerate
cargo build --release -q
out=${PROFILE_OUT:-$(mktemp -d)}
mkdir -p "$out"
echo "token-$$" > "$out/token"
$LR serve --listen 127.0.0.1:7478 --token-file "$out/token" -q & AGENT=$!
iperf3 -s -p 5278 -D --pidfile "$out/iperf3.pid" >/dev/null
trap 'kill $AGENT 2>/dev/null; kill "$(cat "$out/iperf3.pid")" 2>/dev/null' EXIT
sleep 0.5
total=$((SECS + 3))

$LR run stream -m "$M" -d "$total" --warmup 1 --agent 127.0.0.1:7478 --token-file "$out/token" \
  -q --json "$out/lr.json" >/dev/null & C=$!
sleep 2
perf record -q -a -g -e cpu-clock -F 1999 -o "$out/lr.perf" -- sleep "$SECS" 2>/dev/null
wait $C
iperf3 -c 127.0.0.1 -p 5278 -l "$M" -t "$total" -J > "$out/ip.json" & C=$!
sleep 2
perf record -q -a -g -e cpu-clock -F 1999 -o "$out/ip.perf" -- sleep "$SECS" 2>/dev/null
wait $C

python3 -c "import json;print('linerate %.2f Gbit/s' % (json.load(open('$out/lr.json'))['summary']['throughput_bps']/1e9))"
python3 -c "import json;print('iperf3   %.2f Gbit/s' % (json.load(open('$out/ip.json'))['end']['sum_received']['bits_per_second']/1e9))"
for t in lr ip; do
  echo "== $t: share of all samples by thread"
  perf report -i "$out/$t.perf" --no-children --sort comm --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -8
  echo "== $t: top symbols"
  perf report -i "$out/$t.perf" --no-children --sort comm,sym --stdio -g none 2>/dev/null | grep -E '^ +[0-9]' | head -25
done
echo "profiles in $out"
