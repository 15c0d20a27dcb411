#!/usr/bin/env bash
# Capacity at a latency target (issue 27), run alone: the highest offered
# rate (ops/s, open loop) whose get p99 stays within 1 ms, on one memcached
# (-t 2 -m 1024) on loopback, found by two tools with the same load:
#   mutilate --search 99:1000              (its closed-loop peak, then
#                                          bisection to 2%, then 2% steps down)
#   linerate run memcache --search 'p99<=1000us'
# The same key count, key size, value size, 9:1 get:set mix, connections,
# client threads and depth (requests in flight per connection) for both,
# interleaved round by round. The tools choose different steps, so both are
# then re-measured at the same fixed offered loads, 0.8x 0.9x 1.0x 1.1x
# mutilate's capacity (and linerate's own capacity): mutilate -q, linerate
# --rate, the same percentile of the same latency (a get's, from sending the
# request to the last byte of its reply; linerate's corrected latency, from
# the intended send time, is printed beside it).
# Arrivals are evenly spaced in both by default (mutilate -i fixed:1,
# linerate's default); IA=exponential:1 gives both Poisson arrivals
# (mutilate's default distribution, linerate --arrivals poisson). Both wait in
# epoll (mutilate -B: by default it spins, which on 2 cores takes memcached's
# CPU); SPIN=1 spins in both (linerate --spin).
# mutilate is built by bench/peers.sh (MUTILATE); linerate's part needs
# `run --search`, which the script checks before any load.
# Usage: bench/capacity.sh [ROUNDS] [SECONDS] [CONNECTIONS] [THREADS]
#   env: KEYS=100000 KEY_SIZE=30 VALUE=1000 PCT=99 (90 or 99) TARGET_US=1000
#        DEPTH=1 WARMUP=1 LOADS="0.8 0.9 1.0 1.1" IA=fixed:1 SPIN=0
#        LR=./target/release/linerate OUT=DIR (raw outputs kept there)
#        PEERS=/tmp/linerate-peers (bench/peers.sh's folder)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
SECS=${2:-3}
CONNS=${3:-16}
THREADS=${4:-2}
KEYS=${KEYS:-100000}
KEY_SIZE=${KEY_SIZE:-30}
VALUE=${VALUE:-1000}
PCT=${PCT:-99}
TARGET_US=${TARGET_US:-1000}
DEPTH=${DEPTH:-1}
WARMUP=${WARMUP:-1}
LOADS=${LOADS:-0.8 0.9 1.0 1.1}
IA=${IA:-fixed:1}
SPIN=${SPIN:-0}
LR=${LR:-./target/release/linerate}
case "$PCT" in 90|99) ;; *) echo "capacity.sh: PCT is 90 or 99 (a percentile both tools print)" >&2; exit 1 ;; esac
[ $((CONNS % THREADS)) = 0 ] || { echo "capacity.sh: CONNECTIONS must be a multiple of THREADS (mutilate -c is per thread)" >&2; exit 1; }
[ "$LR" = ./target/release/linerate ] && cargo build --release -q
if ! "$LR" run --help 2>/dev/null | grep -q -- '--search'; then
  echo "capacity.sh: this linerate has no 'run --search' (issue 27); nothing run" >&2
  exit 1
fi
eval "$(bench/peers.sh --env "${PEERS:-/tmp/linerate-peers}")"
[ -x "${MUTILATE:-}" ] || { echo "capacity.sh: mutilate was not built (bench/peers.sh)" >&2; exit 1; }
out=${OUT:-$(mktemp -d /tmp/capacity.XXXXXX)}
mkdir -p "$out"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
user=(); [ "$(id -u)" = 0 ] && user=(-u nobody)
memcached -l 127.0.0.1 -p "$PORT" -U 0 -t 2 -m 1024 "${user[@]}" &
MC=$!
trap 'kill $MC 2>/dev/null; wait $MC 2>/dev/null' EXIT
sleep 0.5

# The same load in both tools' words. mutilate: -c is per thread, -u the set
# fraction, -t/-w whole seconds, -d the depth; linerate: -d is the duration.
mut=("$MUTILATE" -s "127.0.0.1:$PORT" --noload -r "$KEYS" -K "$KEY_SIZE" -V "$VALUE" -u 0.1
     -T "$THREADS" -c $((CONNS / THREADS)) -d "$DEPTH" -i "$IA" -t "$SECS")
lr=("$LR" run memcache --target "127.0.0.1:$PORT" --keys "$KEYS" --key-size "$KEY_SIZE" --values "$VALUE"
    --get-set 9:1 --flows "$CONNS" --workers "$THREADS" --outstanding "$DEPTH" -d "$SECS" -q)
if [ "$WARMUP" -gt 0 ]; then mut+=(-w "$WARMUP"); fi
lr+=(--warmup "$WARMUP")
if [ "$SPIN" = 1 ]; then lr+=(--spin); else mut+=(-B); fi
case "$IA" in
  fixed*) ;;
  exponential*) lr+=(--arrivals poisson) ;;
  *) echo "capacity.sh: IA is fixed:1 or exponential:1 (linerate has no other spacing)" >&2; exit 1 ;;
esac
search="p$PCT<=${TARGET_US}us"

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, kernel $(uname -r)"
echo "memcached $(memcached -V | awk '{print $2}') -t 2 -m 1024; mutilate $(cd "$(dirname "$MUTILATE")" && git log -1 --format=%h 2>/dev/null || echo '?')"
echo "rounds=$ROUNDS seconds=$SECS warmup=$WARMUP connections=$CONNS threads=$THREADS depth=$DEPTH keys=$KEYS key=${KEY_SIZE}B value=${VALUE}B get:set=9:1 target p$PCT<=${TARGET_US}us arrivals=$IA spin=$SPIN"
echo "mutilate: ${mut[*]:1}"
echo "linerate: ${lr[*]:1}"

# mutilate's keys, set once (linerate sets its own before each run).
timeout 120 "$MUTILATE" -s "127.0.0.1:$PORT" --loadonly -r "$KEYS" -K "$KEY_SIZE" -V "$VALUE" >/dev/null

# Searches: a bound on each (mutilate: at most ~30 steps of warm-up + window).
for r in $(seq 1 "$ROUNDS"); do
  timeout $((30 * (SECS + WARMUP) + 60)) "${mut[@]}" --search "$PCT:$TARGET_US" -v \
    > "$out/ms.$r.txt" 2> "$out/ms.$r.err" || echo "round $r: mutilate --search failed ($?)" >&2
  timeout 900 "${lr[@]}" --search "$search" --search-resolution 2% --json "$out/ls.$r.json" \
    > "$out/ls.$r.txt" 2>&1 || echo "round $r: linerate --search failed ($?)" >&2
done

# The fixed loads: LOADS x mutilate's median capacity, and linerate's.
loads=$(python3 - "$out" "$ROUNDS" "$LOADS" "$PCT" "$TARGET_US" <<'PY'
import json, re, statistics, sys
out, rounds, factors = sys.argv[1], int(sys.argv[2]), [float(f) for f in sys.argv[3].split()]
pct, target = int(sys.argv[4]), float(sys.argv[5])
def mut_cap(r):
    # mutilate's answer: the peak if its closed loop met the target, else the
    # last step's offered QPS (bisection, then 2% steps down until met).
    try:
        err = open(f"{out}/ms.{r}.err").read()
    except OSError:
        return None
    peak = re.search(r"peak qps = (\d+), nth = ([\d.]+)", err)
    steps = re.findall(r"cur_qps = (\d+), get_qps = ([\d.]+), nth = ([\d.]+)", err)
    if not peak:
        return None
    if float(peak.group(2)) <= target or not steps:
        return float(peak.group(1))
    return float(steps[-1][0])
def lr_cap(r):
    try:
        j = json.load(open(f"{out}/ls.{r}.json"))
        return float((j.get("search") or j["summary"]["search"])["capacity_per_s"])
    except (OSError, KeyError, TypeError, ValueError):
        return None
m = [c for c in (mut_cap(r) for r in range(1, rounds + 1)) if c]
l = [c for c in (lr_cap(r) for r in range(1, rounds + 1)) if c]
loads = set()
if m:
    loads |= {round(f * statistics.median(m)) for f in factors}
if l:
    loads.add(round(statistics.median(l)))
print(" ".join(str(x) for x in sorted(loads) if x > 0))
PY
)
[ -n "$loads" ] || { echo "capacity.sh: neither search found a capacity; see $out" >&2; exit 1; }
echo "fixed offered loads (ops/s): $loads"
for r in $(seq 1 "$ROUNDS"); do
  for q in $loads; do
    timeout $((SECS + WARMUP + 60)) "${mut[@]}" -q "$q" > "$out/mf.$q.$r.txt" 2>&1 \
      || echo "round $r: mutilate -q $q failed ($?)" >&2
    timeout $((SECS + WARMUP + 120)) "${lr[@]}" --rate "$q" --json "$out/lf.$q.$r.json" \
      > "$out/lf.$q.$r.txt" 2>&1 || echo "round $r: linerate --rate $q failed ($?)" >&2
  done
done

python3 - "$out" "$ROUNDS" "$PCT" "$TARGET_US" "$loads" <<'PY'
import json, math, re, statistics, sys
out, rounds, pct, target = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
loads = [int(x) for x in sys.argv[5].split()]
nan = float("nan")
def med(v):
    v = [x for x in v if x is not None and not math.isnan(x)]
    return statistics.median(v) if v else nan
def k(x):
    return "-" if x is None or math.isnan(x) else f"{x/1e3:.1f}k"
def us(x):
    return "-" if x is None or math.isnan(x) else f"{x:.0f}"
col = {90: 6, 95: 7, 99: 8}[pct]  # mutilate's columns: #type avg std min 5th 10th 90th 95th 99th

def mutilate_run(path):  # (achieved ops/s, get pNN µs) of a fixed-load run
    try:
        t = open(path).read()
    except OSError:
        return nan, nan
    q = re.search(r"Total QPS = ([\d.]+)", t)
    row = [l.split() for l in t.splitlines() if l.startswith("read ")]
    return (float(q.group(1)) if q else nan), (float(row[0][col]) if row else nan)

def mutilate_search(r):  # capacity and steps [(offered, achieved, pNN, met)]
    try:
        err = open(f"{out}/ms.{r}.err").read()
    except OSError:
        return nan, [], False
    peak = re.search(r"peak qps = (\d+), nth = ([\d.]+)", err)
    if not peak:
        return nan, [], False
    steps = [(None, float(peak.group(1)), float(peak.group(2)))]
    steps += [(float(a), float(b), float(c)) for a, b, c in
              re.findall(r"cur_qps = (\d+), get_qps = ([\d.]+), nth = ([\d.]+)", err)]
    pts = [(o, a, p, p <= target) for o, a, p in steps]
    if pts[0][3] or len(pts) == 1:
        return pts[0][1], pts, False
    # Stopped at its floor (10% of the peak) without meeting the target?
    floor = not pts[-1][3]
    return pts[-1][0], pts, floor

def linerate_search(r):
    try:
        j = json.load(open(f"{out}/ls.{r}.json"))
        s = j.get("search") or j["summary"]["search"]  # top level, or in the summary
    except (OSError, KeyError, TypeError, ValueError):
        return nan, []
    pts = [(p.get("rate_per_s"), p.get("achieved_per_s"), p.get(f"p{pct}_us"), p.get("met"))
           for p in s.get("points", [])]
    return float(s.get("capacity_per_s") or nan), pts

def linerate_run(path):  # achieved, get pNN µs, corrected get pNN µs
    try:
        kv = json.load(open(path))["summary"]["kv"]
    except (OSError, KeyError, TypeError, ValueError):
        return nan, nan, nan
    g = kv.get("get_latency_us") or {}
    c = kv.get("get_corrected_us") or {}
    return kv.get("ops_per_s", nan), g.get(f"p{pct}", nan), c.get(f"p{pct}", nan)

ms = [mutilate_search(r) for r in range(1, rounds + 1)]
ls = [linerate_search(r) for r in range(1, rounds + 1)]
print("\nsearch steps (offered -> achieved ops/s, get p%d µs, met; mutilate's first is its closed-loop peak)" % pct)
for r in range(rounds):
    print(f"  round {r+1} mutilate: " + "  ".join(
        f"{'peak' if o is None else k(o)}->{k(a)} {us(p)}{'' if m else '!'}" for o, a, p, m in ms[r][1])
        + ("  (stopped at its floor, 10% of the peak, target not met)" if ms[r][2] else ""))
    print(f"  round {r+1} linerate: " + "  ".join(
        f"{k(o)}->{k(a)} {us(p)}{'' if m else '!'}" for o, a, p, m in ls[r][1]))

print(f"\n| tool | capacity at get p{pct} <= {target:.0f} µs, ops/s (median) | per round |")
print("|---|---|---|")
print(f"| mutilate --search {pct}:{target:.0f} | {k(med([c for c, _, _ in ms]))} | {' '.join(k(c) for c, _, _ in ms)} |")
print(f"| linerate --search 'p{pct}<={target:.0f}us' | {k(med([c for c, _ in ls]))} | {' '.join(k(c) for c, _ in ls)} |")

print(f"\nthe same offered loads (medians over {rounds} rounds; get p{pct} from send to reply, µs):")
print(f"| offered ops/s | mutilate achieved | mutilate p{pct} | linerate achieved | linerate p{pct} | linerate corrected p{pct} |")
print("|---|---|---|---|---|---|")
for q in loads:
    m = [mutilate_run(f"{out}/mf.{q}.{r}.txt") for r in range(1, rounds + 1)]
    l = [linerate_run(f"{out}/lf.{q}.{r}.json") for r in range(1, rounds + 1)]
    print(f"| {k(q)} | {k(med([x[0] for x in m]))} | {us(med([x[1] for x in m]))} | "
          f"{k(med([x[0] for x in l]))} | {us(med([x[1] for x in l]))} | {us(med([x[2] for x in l]))} |")
print("\nper round, p%d µs mutilate / linerate at each load:" % pct)
for q in loads:
    m = [mutilate_run(f"{out}/mf.{q}.{r}.txt")[1] for r in range(1, rounds + 1)]
    l = [linerate_run(f"{out}/lf.{q}.{r}.json")[1] for r in range(1, rounds + 1)]
    print(f"  {k(q)}: " + "  ".join(f"{us(a)}/{us(b)}" for a, b in zip(m, l)))
PY
echo "raw outputs: $out"
