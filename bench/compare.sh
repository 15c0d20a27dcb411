#!/usr/bin/env bash
# linerate side by side with its peers on loopback: every path of the
# performance table, interleaved rounds (the order of the tools alternates
# round by round), medians, the ratio linerate / peer per round, and the
# TCP retransmissions of each run (the kernel's TcpRetransSegs over it).
#
# Usage: bench/compare.sh [--cc NAME] [ROUNDS] [SECONDS]   (run alone)
#   --cc NAME  run every tool under this congestion control: the host's
#              default (net.ipv4.tcp_congestion_control) is set to it for the
#              run and put back at the end (root). Without it: the host's
#              default, named in the header. Compare both: bbr and cubic
#              differ (bench/RESULTS.md).
# Peers: Debian's iperf3 (3.12) and sockperf/qperf (scripts/test.sh installs
# them); the newest iperf3 (3.21+, a thread per stream, --gsro), netperf and
# neper from bench/peers.sh (built from their sources on first use).
# ONLY=regex limits the rows. As root it ends with the emulator rows
# (bench/lab.sh, same rounds and seconds; ONLY=emulator runs just those);
# EMULATOR=0 skips them.
set -euo pipefail
cd "$(dirname "$0")/.."
CC=""
if [ "${1:-}" = "--cc" ]; then CC=$2; shift 2; fi
ROUNDS=${1:-3}
SECS=${2:-5}
LR=./target/release/linerate
cargo build --release -q
eval "$(bench/peers.sh --env)"
out=$(mktemp -d)
cc_before=$(sysctl -n net.ipv4.tcp_congestion_control)
cleanup() {
  kill "$(cat "$out/iperf3.pid")" "$(cat "$out/iperf3new.pid")" 2>/dev/null || true
  pkill -f "netserver -p 12865" 2>/dev/null || true
  [ -n "$CC" ] && sysctl -qw net.ipv4.tcp_congestion_control="$cc_before"
  rm -rf "$out"
}
trap cleanup EXIT
if [ -n "$CC" ]; then
  if [ "$(id -u)" != 0 ]; then echo "--cc sets the host's default congestion control: run as root" >&2; exit 2; fi
  sysctl -qw net.ipv4.tcp_congestion_control="$CC"
fi
iperf3 -s -p 5299 -D --pidfile "$out/iperf3.pid" >/dev/null
$IPERF3_NEW -s -p 5298 -D --pidfile "$out/iperf3new.pid" >/dev/null
"$NETSERVER" -p 12865 >/dev/null 2>&1
sleep 0.5

lr() { # args... -> the summary's main figure (bits/s, transactions/s or received datagrams/s)
  $LR run "$@" -d "$SECS" --warmup 1 -q --json "$out/lr.json" >/dev/null
  python3 -c "
import json; s = json.load(open('$out/lr.json'))['summary']
m = s.get('main_metric')
print(s['throughput_bps'] if m == 'throughput' else s['udp']['packets_per_s'] if m == 'packet_rate' else s['transactions_per_s'])"
}
ip_json() { # json file -> bits/s (TCP) or received datagrams/s (UDP)
  python3 -c "
import json; e = json.load(open('$1'))['end']
s = e.get('sum_received') or e['sum']
if 'packets' in s:
    print((s['packets'] - s['lost_packets']) / s['seconds'])
else:
    print(s['bits_per_second'])"
}
iperf() { # iperf3 3.12 options...
  iperf3 -c 127.0.0.1 -p 5299 -t "$SECS" -O 1 -J "$@" > "$out/ip.json"
  ip_json "$out/ip.json"
}
iperfnew() { # iperf3 3.21+ options...
  $IPERF3_NEW -c 127.0.0.1 -p 5298 -t "$SECS" -O 1 -J "$@" > "$out/ip.json"
  ip_json "$out/ip.json"
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

# row name | linerate command | peers, ';'-separated, each "name:command".
# Each round runs linerate once and every peer of the row once.
rows=(
  "stream 1 flow 16K|lr stream -m 16K|iperf3 3.21:iperfnew -l 16K;iperf3 3.12:iperf -l 16K"
  "stream 1 flow 128K|lr stream -m 128K|iperf3 3.21:iperfnew -l 128K;iperf3 3.12:iperf -l 128K;netperf:netperf TCP_STREAM -m 128K"
  "stream 1 flow 1M|lr stream -m 1M|iperf3 3.21:iperfnew -l 1M;iperf3 3.12:iperf -l 1M"
  "stream 1 flow 128K rx|lr stream -m 128K --direction rx|iperf3 3.21 -R:iperfnew -l 128K -R"
  "stream 4 flows|lr stream -F 4|iperf3 3.21 -P 4:iperfnew -P 4;iperf3 3.12 -P 4:iperf -P 4"
  "stream TLS 128K|lr stream -m 128K --tls|linerate clear:lr stream -m 128K"
  "udp 64B|lr udp-stream -m 64|iperf3 3.21:iperfnew -u -l 64 -b 0;iperf3 3.12:iperf -u -l 64 -b 0"
  "udp 64B GSO/GRO|lr udp-stream -m 64 --gso --gro|iperf3 3.21 --gsro:iperfnew -u -l 64 -b 0 --gsro"
  "udp 64B 2 flows|lr udp-stream -m 64 -F 2|iperf3 3.21 -P 2:iperfnew -u -l 64 -b 0 -P 2"
  "crr 64/8192|lr crr --request 64 --response 8192|netperf TCP_CRR:netperf TCP_CRR -r 64,8192"
  "rr 1/1|lr rr|netperf TCP_RR:netperf TCP_RR -r 1,1"
  "rr 1/1 --spin|lr rr --spin|netperf TCP_RR:netperf TCP_RR -r 1,1"
  "rr 200/1000 x10|lr rr --request 200 --response 1000 -F 10 -T 2|neper -F 10 -T 2:neper_rr 10 2 200 1000"
  "stream 10000 flows|lr stream -F 10000 -T 2|linerate 16 flows:lr stream -F 16 -T 2"
  "rr 10000 flows|lr rr -F 10000 -T 2|linerate 16 flows:lr rr -F 16 -T 2"
)

retrans() { nstat -az TcpRetransSegs 2>/dev/null | awk '$1 == "TcpRetransSegs" {print $2}'; }
run() { # file-stem command... : appends the figure and the run's retransmissions
  local stem=$1; shift
  local r0 r1 v
  r0=$(retrans)
  v=$("$@")
  r1=$(retrans)
  echo "$v" >> "$out/$stem.v"
  echo "$((r1 - r0))" >> "$out/$stem.rtx"
}

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, kernel $(uname -r), unpinned"
echo "congestion control: $(sysctl -n net.ipv4.tcp_congestion_control)$([ -n "$CC" ] && echo " (set for this run; host default $cc_before)" || echo " (host default)")"
echo "linerate $(git log -1 --format=%h) $(git diff --quiet HEAD || echo '(modified)'); $(iperf3 --version | head -1 | cut -d' ' -f1-2); $($IPERF3_NEW --version | head -1 | cut -d' ' -f1-2); netperf $("$NETPERF" -V | awk '{print $3}'); rounds=$ROUNDS seconds=$SECS"
for r in $(seq 1 "$ROUNDS"); do
  for i in "${!rows[@]}"; do
    IFS='|' read -r name lrcmd peers <<<"${rows[$i]}"
    [[ -n "${ONLY:-}" && ! "$name" =~ $ONLY ]] && continue
    IFS=';' read -ra plist <<<"$peers"
    sides=(a)
    for j in "${!plist[@]}"; do sides+=("p$j"); done
    # Alternate the order round by round: linerate first, then last.
    if [ $((r % 2)) = 0 ]; then
      rev=()
      for ((k = ${#sides[@]} - 1; k >= 0; k--)); do rev+=("${sides[$k]}"); done
      sides=("${rev[@]}")
    fi
    for side in "${sides[@]}"; do
      if [ "$side" = a ]; then
        # shellcheck disable=SC2086
        run "$i.a" $lrcmd
      else
        p=${plist[${side#p}]}
        # shellcheck disable=SC2086
        run "$i.$side" ${p#*:}
      fi
    done
  done
done

printf '\n%-22s %-20s %14s %14s %7s  %-20s %s\n' path peer linerate peer ratio "ratio per round" "retransmits (linerate / peer, median)"
for i in "${!rows[@]}"; do
  IFS='|' read -r name lrcmd peers <<<"${rows[$i]}"
  [ -f "$out/$i.a.v" ] || continue
  IFS=';' read -ra plist <<<"$peers"
  for j in "${!plist[@]}"; do
    python3 - "$out/$i.a" "$out/$i.p$j" "$name" "${plist[$j]%%:*}" <<'EOF'
import statistics, sys
a = [float(x) for x in open(sys.argv[1] + ".v")]
b = [float(x) for x in open(sys.argv[2] + ".v")]
ra = [int(x) for x in open(sys.argv[1] + ".rtx")]
rb = [int(x) for x in open(sys.argv[2] + ".rtx")]
name, peer = sys.argv[3], sys.argv[4]
if name.startswith("stream"):
    fmt = lambda v: "%.2f Gbit/s" % (v / 1e9)
elif name.startswith("udp"):
    fmt = lambda v: "%.0fk pkt/s" % (v / 1e3)
else:
    fmt = lambda v: "%.0f tx/s" % v
ma, mb = statistics.median(a), statistics.median(b)
tcp = not name.startswith("udp")
rtx = "%d / %d" % (statistics.median(ra), statistics.median(rb)) if tcp else "-"
print("%-22s %-20s %14s %14s %7.3f  %-20s %s" % (name, peer, fmt(ma), fmt(mb), ma / mb,
      " ".join("%.2f" % (x / y) for x, y in zip(a, b)), rtx))
EOF
  done
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
