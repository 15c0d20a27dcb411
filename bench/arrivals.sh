#!/usr/bin/env bash
# Evenly spaced vs Poisson arrivals at the same offered rate (run alone):
# linerate's open loop with --arrivals uniform and --arrivals poisson taking
# turns, round by round, on rr 64/64 and on memcache against one memcached
# (-t 2). Prints the achieved rate, p50/p99 from the send and the corrected
# p50/p99 (from each request's intended send time), µs, per round.
# Usage: bench/arrivals.sh [ROUNDS] [SECONDS] [RR_RATE] [MC_RATE]
#   env: LR=./target/release/linerate FLOWS=4 OUT=DIR (JSON kept there)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
SECS=${2:-3}
RR_RATE=${3:-20000}
MC_RATE=${4:-50000}
FLOWS=${FLOWS:-4}
LR=${LR:-./target/release/linerate}
[ "$LR" = ./target/release/linerate ] && cargo build --release -q
if ! "$LR" run --help 2>/dev/null | grep -q -- '--arrivals'; then
  echo "arrivals.sh: this linerate has no 'run --arrivals'; nothing run" >&2
  exit 1
fi
command -v memcached >/dev/null || { echo "arrivals.sh: memcached is not installed" >&2; exit 1; }
out=${OUT:-$(mktemp -d /tmp/arrivals.XXXXXX)}
mkdir -p "$out"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, kernel $(uname -r), cc $(cat /proc/sys/net/ipv4/tcp_congestion_control)"
echo "rounds=$ROUNDS seconds=$SECS flows=$FLOWS rr 64/64 at $RR_RATE/s; memcache (memcached -t 2, 1K values, 9:1) at $MC_RATE/s"
for r in $(seq 1 "$ROUNDS"); do
  for a in uniform poisson; do
    "$LR" run rr --request 64 --response 64 --flows "$FLOWS" --rate "$RR_RATE" --arrivals "$a" \
      -d "$SECS" --warmup 1 -q --json "$out/rr.$a.$r.json" >/dev/null
    "$LR" run memcache --service 'memcached -t 2' --flows "$FLOWS" --rate "$MC_RATE" --arrivals "$a" \
      -d "$SECS" --warmup 1 -q --json "$out/mc.$a.$r.json" >/dev/null
  done
done
python3 - "$out" "$ROUNDS" <<'PY'
import json, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def row(path):
    s = json.load(open(path))["summary"]
    lat, cor = s.get("latency_us") or {}, s.get("latency_corrected_us") or {}
    return (s.get("transactions_per_s"), lat.get("p50"), lat.get("p99"), cor.get("p50"), cor.get("p99"))
print("| workload | arrivals | round | achieved/s | p50 | p99 | corrected p50 | corrected p99 |")
print("|---|---|---|---|---|---|---|---|")
for w, name in (("rr", "rr 64/64"), ("mc", "memcache")):
    for a in ("uniform", "poisson"):
        for r in range(1, rounds + 1):
            t, p50, p99, c50, c99 = row(f"{out}/{w}.{a}.{r}.json")
            f = lambda x: "-" if x is None else f"{x:.1f}"
            print(f"| {name} | {a} | {r} | {t:.0f} | {f(p50)} | {f(p99)} | {f(c50)} | {f(c99)} |")
PY
echo "raw outputs: $out"
