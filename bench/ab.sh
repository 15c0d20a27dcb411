#!/usr/bin/env bash
# A/B of linerate against an earlier commit of itself, interleaved on loopback:
# every round runs each test with A (REF) and B (the work tree), A first in
# odd rounds and B first in even ones, so drift on a shared VM and any
# first/second bias hit both alike. Prints the median of each side and B/A.
# Usage: bench/ab.sh [REF] [ROUNDS] [SECONDS]   (default HEAD~1 6 4; run alone)
# ONLY=regex runs the tests whose name matches; EXTRA="--cc cubic" adds
# options to every run of both sides.
set -euo pipefail
cd "$(dirname "$0")/.."
REF=${1:-HEAD~1}
ROUNDS=${2:-6}
SECS=${3:-4}
scratch=${LINERATE_AB_DIR:-/tmp/linerate-ab}
mkdir -p "$scratch"
commit=$(git rev-parse "$REF")
if [ ! -x "$scratch/$commit/target/release/linerate" ]; then
  rm -rf "$scratch/$commit"
  git worktree add --detach "$scratch/$commit" "$commit" >/dev/null
  (cd "$scratch/$commit" && cargo build --release -q)
fi
A="$scratch/$commit/target/release/linerate"
cargo build --release -q
B=./target/release/linerate
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, kernel $(uname -r)"
echo "A = $(git log -1 --format='%h %s' "$commit")"
echo "B = work tree on $(git log -1 --format='%h %s') $(git diff --quiet HEAD || echo '(modified)')"
echo "rounds=$ROUNDS seconds=$SECS, unpinned"

# name | arguments | summary field
tests=(
  "stream 1 flow 128K|stream -m 128K|throughput_bps"
  "stream 4 flows|stream -F 4|throughput_bps"
  "stream rx|stream -m 128K --direction rx|throughput_bps"
  "rr 1/1|rr|transactions_per_s"
  "rr 200/1000 x10|rr --request 200 --response 1000 -F 10|transactions_per_s"
  "crr 64/8192|crr --request 64 --response 8192|transactions_per_s"
  "conn|conn|transactions_per_s"
  "tls-handshake|tls-handshake --no-baseline|transactions_per_s"
  "stream TLS aes256-gcm|stream --tls --cipher aes256-gcm --no-baseline|throughput_bps"
  "stream 10000 flows|stream -F 10000 -T 2|throughput_bps"
  "udp 64B|udp-stream --message 64|udp.packets_per_s"
  "udp 64B GSO/GRO|udp-stream --message 64 --gso --gro|udp.packets_per_s"
  "quic-stream|quic-stream --no-baseline|throughput_bps"
  "quic-rr 64/64 x16|quic-rr --request 64 --response 64 --outstanding 16 --no-baseline|transactions_per_s"
  "quic-crr 64/64|quic-crr --request 64 --response 64 --no-baseline|transactions_per_s"
  "quic-handshake|quic-handshake --no-baseline|transactions_per_s"
)

for r in $(seq 1 "$ROUNDS"); do
  for t in "${tests[@]}"; do
    IFS='|' read -r name args field <<<"$t"
    [[ -n "${ONLY:-}" && ! "$name" =~ $ONLY ]] && continue
    order="A B"; [ $((r % 2)) = 0 ] && order="B A"
    for side in $order; do
      bin=$A; [ "$side" = B ] && bin=$B
      # shellcheck disable=SC2086
      $bin run $args ${EXTRA:-} -d "$SECS" --warmup 1 -q --json "$out/r.json" >/dev/null
      python3 -c "
import json, functools
print(functools.reduce(lambda d, k: d[k], '$field'.split('.'), json.load(open('$out/r.json'))['summary']))" \
        >> "$out/$side-${name//[^a-zA-Z0-9]/_}"
    done
  done
done

printf '%-24s %14s %14s %7s  %s\n' test A B B/A "B/A per round"
for t in "${tests[@]}"; do
  IFS='|' read -r name args field <<<"$t"
  [[ -n "${ONLY:-}" && ! "$name" =~ $ONLY ]] && continue
  python3 - "$out/A-${name//[^a-zA-Z0-9]/_}" "$out/B-${name//[^a-zA-Z0-9]/_}" "$name" "$field" <<'EOF'
import statistics, sys
a = [float(x) for x in open(sys.argv[1])]
b = [float(x) for x in open(sys.argv[2])]
name, field = sys.argv[3], sys.argv[4]
fmt = {"throughput_bps": lambda v: "%.2f Gbit/s" % (v / 1e9),
       "udp.packets_per_s": lambda v: "%.0fk pkt/s" % (v / 1e3)}.get(field, lambda v: "%.0f tx/s" % v)
ma, mb = statistics.median(a), statistics.median(b)
rounds = " ".join("%.2f" % (y / x) for x, y in zip(a, b))
print("%-24s %14s %14s %7.3f  %s" % (name, fmt(ma), fmt(mb), mb / ma, rounds))
EOF
done
