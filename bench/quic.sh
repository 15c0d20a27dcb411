#!/usr/bin/env bash
# QUIC bulk transfer on loopback, one connection, linerate against quinn's
# own perf tool (client and server, built by bench/quinn_perf.sh), in
# interleaved rounds: upload (linerate tx) and download (linerate rx).
# Both run quinn-proto with TLS on aws-lc-rs (bench/quinn_perf.sh builds
# quinn-perf so), AES-128-GCM first.
#
# Usage: bench/quic.sh [ROUNDS] [SECONDS]     (default 3 rounds of 5 s)
# QUIC_CC=bbr (or newreno) runs both tools under that congestion control
# (linerate `--cc`, quinn-perf `--congestion`, on both ends); default cubic.
# Prints one line per run and the median ratio linerate / quinn-perf.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
SECS=${2:-5}
QCC=${QUIC_CC:-cubic}
LR=./target/release/linerate
cargo build --release -q
PERF=$(bench/quinn_perf.sh)
echo "congestion control: $QCC"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs, kernel $(uname -r)"
port=$((20000 + RANDOM % 20000))
"$PERF" server --listen "127.0.0.1:$port" --congestion "$QCC" >/dev/null 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
sleep 0.5

# linerate's throughput in Mbit/s from its JSON result.
lr() { # DIRECTION
  local out
  out=$(mktemp)
  $LR run quic-stream --direction "$1" --cipher aes128-gcm --cc "$QCC" -d "$SECS" --warmup 1 \
    --no-baseline -q --json "$out" >/dev/null
  python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['summary']['throughput_bps']/1e6))" "$out"
  rm -f "$out"
}
# quinn-perf's mean throughput over its requests, Mbit/s (1 GiB requests,
# one at a time on one connection).
qp() { # upload|download
  local args
  if [ "$1" = upload ]; then args="--upload-size 1G --download-size 0"; else args="--upload-size 0 --download-size 1G"; fi
  # shellcheck disable=SC2086
  timeout $((SECS + 20)) "$PERF" client "127.0.0.1:$port" --congestion "$QCC" --duration $((SECS + 1)) $args 2>/dev/null |
    awk -F'│' -v col="$([ "$1" = upload ] && echo 5 || echo 6)" '/AVG/ { split($col, a, " "); print int(a[1]) }' | tail -1
}

ratios_tx=() ratios_rx=()
for r in $(seq 1 "$ROUNDS"); do
  a=$(lr tx); b=$(qp upload)
  c=$(lr rx); d=$(qp download)
  echo "round $r: upload linerate $a Mbit/s, quinn-perf $b; download linerate $c, quinn-perf $d"
  ratios_tx+=("$(python3 -c "print(round($a/$b, 3))")")
  ratios_rx+=("$(python3 -c "print(round($c/$d, 3))")")
done
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo "median linerate/quinn-perf: upload $(median "${ratios_tx[@]}") (rounds ${ratios_tx[*]}), download $(median "${ratios_rx[@]}") (rounds ${ratios_rx[*]})"
