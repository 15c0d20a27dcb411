#!/usr/bin/env bash
# QUIC against TLS over TCP through an emulated WAN (root): one flow each
# way through a lab link (default 100 Mbit/s, 50 ms, 0.1% loss), under
# cubic and bbr (the kernel's for TCP, quinn's for QUIC), in interleaved
# rounds. The question: what goodput each transport keeps on a lossy long
# path, where TCP's and QUIC's loss recovery and congestion control, not
# the CPU, set the rate.
#
# Usage: bench/quic_lab.sh [ROUNDS] [SECONDS] [RATE] [RTT] [LOSS] [AQM]
#        (default 2 rounds of 15 s, 100mbit 50ms 0.1%, fifo)
# AQM: the bottleneck's queue (fifo, codel, fq_codel: lab up --aqm);
# CCS="cubic" runs one controller only (default "cubic bbr").
# Prints one line per run and the median goodput per (cc, direction,
# transport) with the ratio QUIC / TLS over TCP.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-2}
SECS=${2:-15}
RATE=${3:-100mbit}
RTT=${4:-50ms}
LOSS=${5:-0.1%}
AQM=${6:-fifo}
CCS=${CCS:-cubic bbr}
LR=./target/release/linerate
[ "$(id -u)" = 0 ] || { echo "the lab needs root" >&2; exit 2; }
cargo build --release -q
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs, kernel $(uname -r)"
lab=ql$$
$LR lab up "$lab" --rate "$RATE" --rtt "$RTT" --loss "$LOSS" --aqm "$AQM" --no-calibrate >/dev/null
trap '$LR lab down "$lab" >/dev/null 2>&1 || true' EXIT

# Goodput in Mbit/s from linerate's JSON result.
run() { # CC DIRECTION tcp|quic
  local out args
  out=$(mktemp)
  if [ "$3" = quic ]; then args="--transport quic"; else args="--tls"; fi
  # shellcheck disable=SC2086
  $LR run stream $args --cc "$1" --direction "$2" --cipher aes128-gcm --lab "$lab" \
    -d "$SECS" --warmup 3 --no-baseline -q --json "$out" >/dev/null
  python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['summary']['throughput_bps']/1e6, 1))" "$out"
  rm -f "$out"
}

declare -A seen
for r in $(seq 1 "$ROUNDS"); do
  for cc in $CCS; do
    for dir in tx rx; do
      t=$(run "$cc" "$dir" tcp); q=$(run "$cc" "$dir" quic)
      echo "round $r: $cc $dir: TLS over TCP $t Mbit/s, QUIC $q Mbit/s"
      seen[$cc-$dir-tcp]+="$t "; seen[$cc-$dir-quic]+="$q "
    done
  done
done
median() { printf '%s\n' $1 | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
for cc in $CCS; do
  for dir in tx rx; do
    t=$(median "${seen[$cc-$dir-tcp]}"); q=$(median "${seen[$cc-$dir-quic]}")
    echo "median $cc $dir ($RATE, $RTT, $LOSS loss, $AQM): TLS over TCP $t, QUIC $q Mbit/s, QUIC/TCP $(python3 -c "print(round($q/max($t,0.001), 2))")"
  done
done
