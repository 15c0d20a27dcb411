#!/usr/bin/env bash
# Responsiveness (RPM) through the lab, measured by goresponsiveness (the
# draft's Go client, built by bench/goresponsiveness.sh) against a linerate
# agent's RPM server (`serve --rpm`) in the lab's server namespace: a
# 100 Mbit/s, 20 ms link with a deep drop-tail FIFO and with fq_codel.
# The idle round trip's RPM is 60,000 / 20 = 3,000.
#
# Usage: bench/rpm_lab.sh [ROUNDS] [SECONDS]   (root; run alone; default 2 rounds, 12 s tests)
# QUEUE sets the queue's size (default 4M: deep at 100 Mbit/s, 335 ms).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-2}
SECS=${2:-12}
QUEUE=${QUEUE:-4M}
LR=./target/release/linerate
cargo build --release -q
NQ=$(bench/goresponsiveness.sh)
LAB=rpm$$
agent=""
cleanup() {
  [ -n "$agent" ] && kill "$agent" 2>/dev/null || true
  $LR lab down $LAB >/dev/null 2>&1 || true
}
trap cleanup EXIT
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs, kernel $(uname -r)"
echo "goresponsiveness: $(git -C "$(dirname "$NQ")" log --format='%h %cs' -1)"
for r in $(seq 1 "$ROUNDS"); do
  for aqm in fifo fq_codel; do
    $LR lab up $LAB --rtt 20ms --rate 100mbit --queue "$QUEUE" --aqm "$aqm" --no-calibrate >/dev/null
    $LR serve --netns "lr-$LAB-s" --listen 127.0.0.1:0 --insecure-no-token --no-crypto-twin \
      --rpm 198.18.1.1:4043 -q >/dev/null 2>&1 &
    agent=$!
    sleep 1
    out=$(ip netns exec "lr-$LAB-c" "$NQ" -url https://198.18.1.1:4043/.well-known/nq \
      -rpm.timeout "$SECS" 2>&1 || true)
    dl=$(awk '/^Download:/ { d = 1 } d && /Throughput:/ { print $2; exit }' <<<"$out")
    ul=$(awk '/^Upload:/ { u = 1 } u && /Throughput:/ { print $2; exit }' <<<"$out")
    # Each direction's RPM (P90): the download's probes wait on the
    # server's side (linerate's), the upload's on the client's.
    dlr=$(awk '/^Download:/ { d = 1 } d && /RPM:/ { print $2; exit }' <<<"$out")
    ulr=$(awk '/^Upload:/ { u = 1 } u && /RPM:/ { print $2; exit }' <<<"$out")
    rpm=$(awk '/^Final RPM:.*P90/ { print $3; exit }' <<<"$out")
    trimmed=$(awk '/^Final RPM:.*Trimmed/ { print $3; exit }' <<<"$out")
    echo "round $r $aqm: download ${dl:-?} Mbit/s (RPM ${dlr:-?}), upload ${ul:-?} Mbit/s (RPM ${ulr:-?}), final RPM ${rpm:-?} (P90), ${trimmed:-?} (trimmed mean)"
    kill "$agent" 2>/dev/null || true
    wait "$agent" 2>/dev/null || true
    agent=""
    $LR lab down $LAB >/dev/null
  done
done
