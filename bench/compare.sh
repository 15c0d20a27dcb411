#!/usr/bin/env bash
# linerate side by side with its peers on loopback: every path of the
# performance table, interleaved rounds (the order of the tools alternates
# round by round), medians and the ratio linerate / peer.
# Usage: bench/compare.sh [ROUNDS] [SECONDS]   (run alone: nothing else busy)
# Needs iperf3 (scripts/test.sh installs it); netperf and neper come from
# bench/peers.sh (built from their sources on first use). ONLY=regex limits
# the rows. As root it ends with the emulator rows (bench/lab.sh, same
# rounds and seconds; ONLY=emulator runs just those); EMULATOR=0 skips them.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
SECS=${2:-5}
LR=./target/release/linerate
cargo build --release -q
eval "$(bench/peers.sh --env)"
out=$(mktemp -d)
iperf3 -s -p 5299 -D --pidfile "$out/iperf3.pid" >/dev/null
"$NETSERVER" -p 12865 >/dev/null 2>&1
trap 'kill "$(cat "$out/iperf3.pid")" 2>/dev/null; pkill -f "netserver -p 12865" 2>/dev/null; rm -rf "$out"' EXIT
sleep 0.5

lr() { # args... -> the summary's main figure (bits/s or transactions/s)
  $LR run "$@" -d "$SECS" --warmup 1 -q --json "$out/lr.json" >/dev/null
  python3 -c "
import json; s = json.load(open('$out/lr.json'))['summary']
print(s['throughput_bps'] if s.get('main_metric') == 'throughput' else s['transactions_per_s'])"
}
iperf() { # write size
  iperf3 -c 127.0.0.1 -p 5299 -l "$1" -t "$SECS" -O 1 -J > "$out/ip.json"
  python3 -c "import json; print(json.load(open('$out/ip.json'))['end']['sum_received']['bits_per_second'])"
}
netperf() { # test, test options
  local t=$1; shift
  local v
  v=$("$NETPERF" -P 0 -H 127.0.0.1 -p 12865 -l "$SECS" -t "$t" -- "$@" -o THROUGHPUT)
  if [ "$t" = TCP_STREAM ]; then python3 -c "print($v * 1e6)"; else echo "$v"; fi
}
neper_rr() { # flows threads request response
  "$NEPER/tcp_rr" --nolog -T "$2" -F "$1" -l "$((SECS + 1))" -Q "$3" -R "$4" -P 12868 >/dev/null 2>&1 &
  local srv=$!
  sleep 0.3
  "$NEPER/tcp_rr" --nolog -c -H 127.0.0.1 -T "$2" -F "$1" -l "$SECS" -Q "$3" -R "$4" -P 12868 2>/dev/null \
    | awk -F= '/^throughput=/ {print $2; exit}'
  wait $srv 2>/dev/null || true
}

# row name | linerate command | peer name | peer command
rows=(
  "stream 1 flow 16K|lr stream -m 16K|iperf3|iperf 16K"
  "stream 1 flow 64K|lr stream -m 64K|iperf3|iperf 64K"
  "stream 1 flow 128K|lr stream -m 128K|iperf3|iperf 128K"
  "stream 1 flow 128K|lr stream -m 128K|netperf|netperf TCP_STREAM -m 128K"
  "stream 1 flow 1M|lr stream -m 1M|iperf3|iperf 1M"
  "crr 64/8192|lr crr --request 64 --response 8192|netperf|netperf TCP_CRR -r 64,8192"
  "rr 1/1|lr rr|netperf|netperf TCP_RR -r 1,1"
  "rr 1/1 --spin|lr rr --spin|netperf|netperf TCP_RR -r 1,1"
  "rr 200/1000 x10|lr rr --request 200 --response 1000 -F 10 -T 2|neper|neper_rr 10 2 200 1000"
  "stream 10000 flows|lr stream -F 10000 -T 2|linerate 16 flows|lr stream -F 16 -T 2"
  "rr 10000 flows|lr rr -F 10000 -T 2|linerate 16 flows|lr rr -F 16 -T 2"
)

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, kernel $(uname -r), unpinned"
echo "linerate $(git log -1 --format=%h) $(git diff --quiet HEAD || echo '(modified)'); $(iperf3 --version | head -1); netperf $("$NETPERF" -V | awk '{print $3}'); rounds=$ROUNDS seconds=$SECS"
for r in $(seq 1 "$ROUNDS"); do
  for i in "${!rows[@]}"; do
    IFS='|' read -r name lrcmd peer peercmd <<<"${rows[$i]}"
    [[ -n "${ONLY:-}" && ! "$name" =~ $ONLY ]] && continue
    if [ $((r % 2)) = 1 ]; then order="a b"; else order="b a"; fi
    for side in $order; do
      if [ "$side" = a ]; then v=$($lrcmd); else v=$($peercmd); fi
      echo "$v" >> "$out/$i.$side"
    done
  done
done

printf '\n%-22s %-18s %14s %14s %7s  %s\n' path peer linerate peer ratio "ratio per round"
for i in "${!rows[@]}"; do
  IFS='|' read -r name lrcmd peer peercmd <<<"${rows[$i]}"
  [ -f "$out/$i.a" ] || continue
  python3 - "$out/$i.a" "$out/$i.b" "$name" "$peer" <<'EOF'
import statistics, sys
a = [float(x) for x in open(sys.argv[1])]
b = [float(x) for x in open(sys.argv[2])]
name, peer = sys.argv[3], sys.argv[4]
bits = name.startswith("stream")
fmt = (lambda v: "%.2f Gbit/s" % (v / 1e9)) if bits else (lambda v: "%.0f tx/s" % v)
ma, mb = statistics.median(a), statistics.median(b)
print("%-22s %-18s %14s %14s %7.3f  %s" % (name, peer, fmt(ma), fmt(mb), ma / mb,
      " ".join("%.2f" % (x / y) for x, y in zip(a, b))))
EOF
done

# The emulator rows of the table have no peer: its capacity and CPU at
# 1 Gbit/s, from bench/lab.sh (root: it builds labs).
if [[ "${EMULATOR:-1}" != 0 && ( -z "${ONLY:-}" || "emulator" =~ $ONLY ) ]]; then
  echo
  if [ "$(id -u)" = 0 ]; then
    echo "emulator (bench/lab.sh $ROUNDS $SECS):"
    LR=$LR bench/lab.sh "$ROUNDS" "$SECS" | tail -n +3
  else
    echo "emulator rows skipped: bench/lab.sh needs root"
  fi
fi
