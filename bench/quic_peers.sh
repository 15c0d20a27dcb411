#!/usr/bin/env bash
# QUIC requests/s and handshakes/s on loopback against quinn's own perf
# tool (built by bench/quinn_perf.sh), in interleaved rounds, both ways:
#
# - servers: the same linerate client (`run --perf-server`) against
#   quinn's `perf server` and against a linerate agent's perf server
#   (`serve --quic-perf`): rr 64 B/64 B on one connection with 16 streams
#   at once, crr (a connection per request) on one and on four
#   connections at once, and resumed handshakes.
#   Ratio: linerate's server / quinn's; and each server's own CPU per
#   transaction (its process's CPU time over the run, warm-up included,
#   over the transactions of the run at the window's rate), which one
#   connection at a time hides in the rate: client and server take turns.
# - clients: linerate's client and quinn's `perf client` against quinn's
#   server, 64 B/64 B requests, 16 at once on one connection. Ratio:
#   linerate's client / quinn's.
#
# Usage: bench/quic_peers.sh [ROUNDS] [SECONDS]   (default 3 rounds of 5 s)
# Run alone: two cores shared with anything else measure nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
SECS=${2:-5}
LR=./target/release/linerate
cargo build --release -q
PERF=$(bench/quinn_perf.sh)
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs, kernel $(uname -r)"
echo "quinn: $(git -C "$(dirname "$PERF")/../.." log --format='%h %cs' -1)"
qport=$((20000 + RANDOM % 10000))
lport=$((30000 + RANDOM % 10000))
"$PERF" server --listen "127.0.0.1:$qport" >/dev/null 2>&1 &
qserver=$!
$LR serve --listen 127.0.0.1:0 --insecure-no-token --no-crypto-twin \
  --quic-perf "127.0.0.1:$lport" -q >/dev/null 2>&1 &
lserver=$!
trap 'kill $qserver $lserver 2>/dev/null || true' EXIT
sleep 1

# linerate's client against the perf server on PORT: "rate µs/tx".
lr() { # PORT KIND ARGS...
  local port=$1 out
  shift
  out=$(mktemp)
  # shellcheck disable=SC2068
  $LR run "$@" --perf-server "127.0.0.1:$port" -d "$SECS" --warmup 1 -q --json "$out" >/dev/null
  python3 - "$out" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
print(round(s["transactions_per_s"]), round(s["cpu"]["client"]["us_per_tx"] or 0, 2))
EOF
  rm -f "$out"
}
# quinn's client: its requests per second (its own RPS line).
qp() { # PORT
  timeout $((SECS + 20)) "$PERF" client "127.0.0.1:$1" --duration "$SECS" \
    --upload-size 64 --download-size 64 --bi-requests 16 2>/dev/null |
    awk '/^RPS:/ { v = $2 } END { printf "%d\n", v }'
}
ratio() { python3 -c "print(round($1/max($2,1e-9), 3))"; }
# A process's CPU time so far, in clock ticks.
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# µs of server CPU per transaction: TICKS0 TICKS1 RATE.
per_tx() { python3 -c "print(round(($2 - $1) / $(getconf CLK_TCK) * 1e6 / max($3 * ($SECS + 1), 1), 1))"; }
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

declare -A R S
tests=(rr crr crr4 resumed)
args_rr="quic-rr --request 64 --response 64 --outstanding 16"
args_crr="quic-crr --request 64 --response 64"
args_crr4="quic-crr --request 64 --response 64 --flows 4"
args_resumed="quic-handshake --resume on"
for r in $(seq 1 "$ROUNDS"); do
  for t in "${tests[@]}"; do
    a="args_$t"
    t0=$(ticks $qserver)
    read -r q qc <<<"$(lr "$qport" ${!a})"
    t1=$(ticks $qserver)
    qs=$(per_tx "$t0" "$t1" "$q")
    t0=$(ticks $lserver)
    read -r l lc <<<"$(lr "$lport" ${!a})"
    t1=$(ticks $lserver)
    ls=$(per_tx "$t0" "$t1" "$l")
    echo "round $r $t: quinn server $q/s ($qs µs/tx server, $qc client), linerate server $l/s ($ls µs/tx server, $lc client)"
    R[$t]="${R[$t]:-} $(ratio "$l" "$q")"
    S[$t]="${S[$t]:-} $(ratio "$ls" "$qs")"
  done
  read -r a ac <<<"$(lr "$qport" $args_rr)"
  b=$(qp "$qport")
  echo "round $r clients (quinn server, 64 B/64 B, 16 at once): linerate $a/s, quinn-perf $b/s"
  R[clients]="${R[clients]:-} $(ratio "$a" "$b")"
done
for t in "${tests[@]}"; do
  # shellcheck disable=SC2086
  echo "median linerate server / quinn server, $t: $(median ${R[$t]}) (rounds${R[$t]}); server CPU per transaction, linerate / quinn: $(median ${S[$t]}) (rounds${S[$t]})"
done
# shellcheck disable=SC2086
echo "median linerate client / quinn client, rr: $(median ${R[clients]}) (rounds${R[clients]})"
