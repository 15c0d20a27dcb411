#!/usr/bin/env bash
# memcached on loopback (issue 13), run alone: one memcached (-t 2 -m 1024),
# 90% gets / 10% sets, values 1-2 KB, 100k keys, the same connections on two
# client threads, interleaved round by round:
#   closed loop: linerate run memcache --target   vs  memcaslap (libmemcached-tools)
#                                                 vs  memtier_benchmark
#   open loop at the same offered load: linerate --rate vs memtier --rate-limiting
# Operations/s from each tool's own report, and memcached's view of the same
# run from its stats (cmd_get + cmd_set, rusage): memcached CPU per operation
# is computed the same way for every tool.
# Usage: bench/memcache.sh [ROUNDS] [SECONDS] [CONNECTIONS] [RATE]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
SECS=${2:-5}
CONNS=${3:-16}
RATE=${4:-60000}
LR=${LR:-./target/release/linerate}
[ "$LR" = ./target/release/linerate ] && cargo build --release -q
eval "$(bench/peers.sh --env)"
command -v memcaslap >/dev/null || { echo "memcaslap: apt install libmemcached-tools" >&2; exit 1; }
out=$(mktemp -d)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
user=(); [ "$(id -u)" = 0 ] && user=(-u nobody)
memcached -l 127.0.0.1 -p "$PORT" -U 0 -t 2 -m 1024 "${user[@]}" &
MC=$!
trap 'kill $MC 2>/dev/null; rm -rf "$out"' EXIT
sleep 0.5
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, kernel $(uname -r)"
echo "memcached $(memcached -V | awk '{print $2}') -t 2 -m 1024; rounds=$ROUNDS seconds=$SECS connections=$CONNS open-loop rate=$RATE/s"

stats() { # cmd_get+cmd_set and rusage user+system of memcached, now
  python3 - "$PORT" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"stats\r\n")
b = b""
while not b.endswith(b"END\r\n"):
    b += s.recv(65536)
st = dict(l.split(" ", 2)[1:] for l in b.decode().splitlines() if l.startswith("STAT "))
print(int(st["cmd_get"]) + int(st["cmd_set"]), float(st["rusage_user"]) + float(st["rusage_system"]))
PY
}

# memaslap's mix: 16-byte keys, 1-2 KB values, 10% sets.
cat > "$out/memaslap.cfg" <<EOF
key
16 16 1
value
1024 2048 1
cmd
0 0.1
1 0.9
EOF
# memtier's own keys, set once before the rounds.
"$MEMTIER" -s 127.0.0.1 -p "$PORT" -P memcache_text --key-prefix=mt --key-pattern=P:P \
  --key-minimum=1 --key-maximum=100000 --ratio=1:0 --requests=allkeys -t 1 -c 1 \
  --data-size-range=1024-2048 --hide-histogram >/dev/null 2>&1

run() { # NAME CMD...: records the tool's output and memcached's view
  local name=$1; shift
  read -r o0 c0 < <(stats)
  "$@" > "$out/$name.txt" 2>&1 || true
  read -r o1 c1 < <(stats)
  echo "$((o1 - o0)) $(python3 -c "print($c1 - $c0)")" > "$out/$name.mc"
}

per_conn=$((CONNS / 2))
for r in $(seq 1 "$ROUNDS"); do
  run "lr.$r" "$LR" run memcache --target "127.0.0.1:$PORT" --flows "$CONNS" -T 2 --keys 100000 \
    --values 1K-2K -d "$SECS" --warmup 1 -q --json "$out/lr.$r.json"
  run "ms.$r" memcaslap -s "127.0.0.1:$PORT" -T 2 -c "$CONNS" -t "${SECS}s" -F "$out/memaslap.cfg" \
    -w "$(( (100000 / CONNS + 1023) / 1024 ))k"
  run "mt.$r" "$MEMTIER" -s 127.0.0.1 -p "$PORT" -P memcache_text -t 2 -c "$per_conn" --ratio=1:9 \
    --key-prefix=mt --key-pattern=R:R --key-minimum=1 --key-maximum=100000 --data-size-range=1024-2048 \
    --test-time="$SECS" --hide-histogram --json-out-file="$out/mt.$r.json"
  run "lro.$r" "$LR" run memcache --target "127.0.0.1:$PORT" --flows "$CONNS" -T 2 --keys 100000 \
    --values 1K-2K --rate "$RATE" -d "$SECS" --warmup 1 -q --json "$out/lro.$r.json"
  run "mto.$r" "$MEMTIER" -s 127.0.0.1 -p "$PORT" -P memcache_text -t 2 -c "$per_conn" --ratio=1:9 \
    --key-prefix=mt --key-pattern=R:R --key-minimum=1 --key-maximum=100000 --data-size-range=1024-2048 \
    --rate-limiting=$((RATE / CONNS)) --test-time="$SECS" --hide-histogram --json-out-file="$out/mto.$r.json"
done

python3 - "$out" "$ROUNDS" <<'PY'
import json, re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def mc(name):
    ops, cpu = open(f"{out}/{name}.mc").read().split()
    return int(ops), float(cpu)
def memtier(name):
    j = json.load(open(f"{out}/{name}.json"))["ALL STATS"]
    tot = j["Totals"]["Ops/sec"]
    g = j["Gets"]
    p = g.get("Percentile Latencies", {})
    p99 = p.get("p99.00") or p.get("p99.0") or p.get("p99")
    return tot, (p99 * 1000 if p99 is not None else float("nan")), j["Gets"].get("Hits/sec", 0) / max(j["Gets"]["Ops/sec"], 1e-9)
rows = {k: [] for k in ["lr", "ms", "mt", "lro", "mto"]}
for r in range(1, rounds + 1):
    k = json.load(open(f"{out}/lr.{r}.json"))["summary"]["kv"]
    o, c = mc(f"lr.{r}")
    rows["lr"].append((k["ops_per_s"], k["get_latency_us"]["p99"], k["hit_ratio"], 1e6 * c / max(o, 1)))
    t = open(f"{out}/ms.{r}.txt").read()
    m = re.findall(r"TPS:\s*(\d+)", t)
    o, c = mc(f"ms.{r}")
    rows["ms"].append((float(m[-1]) if m else float("nan"), float("nan"), float("nan"), 1e6 * c / max(o, 1)))
    tot, p99, hr = memtier(f"mt.{r}")
    o, c = mc(f"mt.{r}")
    rows["mt"].append((tot, p99, hr, 1e6 * c / max(o, 1)))
    k = json.load(open(f"{out}/lro.{r}.json"))["summary"]["kv"]
    o, c = mc(f"lro.{r}")
    rows["lro"].append((k["ops_per_s"], k["get_latency_us"]["p99"], k["hit_ratio"], 1e6 * c / max(o, 1),
                        (k.get("get_corrected_us") or {}).get("p99", float("nan"))))
    tot, p99, hr = memtier(f"mto.{r}")
    o, c = mc(f"mto.{r}")
    rows["mto"].append((tot, p99, hr, 1e6 * c / max(o, 1)))
med = lambda v: statistics.median(v)
names = {"lr": "linerate (closed loop)", "ms": "memcaslap", "mt": "memtier_benchmark",
         "lro": "linerate --rate (open loop)", "mto": "memtier --rate-limiting"}
print("\n| tool | ops/s (median) | per round | get p99 µs (median) | hit ratio | memcached CPU µs/op (its stats) |")
print("|---|---|---|---|---|---|")
for k, v in rows.items():
    print(f"| {names[k]} | {med([x[0] for x in v])/1e3:.1f}k | {' '.join(f'{x[0]/1e3:.1f}k' for x in v)} | "
          f"{med([x[1] for x in v]):.0f} | {med([x[2] for x in v]):.3f} | {med([x[3] for x in v]):.2f} |")
print("\nlinerate / memcaslap ops/s per round:", " ".join(f"{a[0]/b[0]:.2f}" for a, b in zip(rows["lr"], rows["ms"])))
print("linerate / memtier ops/s per round:  ", " ".join(f"{a[0]/b[0]:.2f}" for a, b in zip(rows["lr"], rows["mt"])))
print("open loop get p99, linerate / memtier per round:", " ".join(f"{a[1]/b[1]:.2f}" for a, b in zip(rows["lro"], rows["mto"])))
print("open loop linerate corrected get p99 µs per round:", " ".join(f"{a[4]:.0f}" for a in rows["lro"]))
PY
