#!/usr/bin/env bash
# Many hosts (issue 11), run alone (nothing else busy). Two comparisons,
# interleaved round by round:
#   rack   (root) a namespace rack of 4 clients x 1 Gbit/s (1 ms RTT) into
#          one server: linerate's aggregate (`run stream --lab`, 4 flows,
#          one per client) against 4 iperf3 clients started at once (one
#          per client namespace, summed). Goal: within 3% of each other.
#   coord  the cost of coordination on loopback: the same 4 flows from 2
#          client agents (127.0.0.3, .4) against 1 client agent (127.0.0.3),
#          both into one server agent (127.0.0.1). Goal: same total within 5%.
# Usage: bench/hosts.sh [ROUNDS] [SECONDS]      ONLY=rack|coord to run one
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
SECS=${2:-5}
ONLY=${ONLY:-}
LR=${LR:-./target/release/linerate}
[ "$LR" = ./target/release/linerate ] && cargo build --release -q
out=$(mktemp -d)
LAB=bh$$
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  $LR lab down $LAB >/dev/null 2>&1 || true
  rm -rf "$out"
}
trap cleanup EXIT

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, kernel $(uname -r)"
echo "rounds=$ROUNDS seconds=$SECS (warm-up 3 s excluded for linerate, iperf3 -O 3)"

if [ -z "$ONLY" ] || [ "$ONLY" = rack ]; then
  if [ "$(id -u)" != 0 ]; then echo "rack: skipped (needs root)"; else
  $LR lab up $LAB --clients 4 --servers 1 --rate 1gbit --rtt 1ms --no-calibrate >/dev/null
  for r in $(seq 1 "$ROUNDS"); do
    $LR run stream --lab $LAB -F 4 -d "$SECS" --warmup 3 -q --json "$out/rack-lr.$r.json" >/dev/null
    spids=()
    for k in 0 1 2 3; do
      ip netns exec lr-$LAB-s iperf3 -s -1 -p 520$k >/dev/null 2>&1 & spids+=($!)
    done
    sleep 0.5
    cpids=()
    for k in 0 1 2 3; do
      ns=lr-$LAB-c; [ $k -gt 0 ] && ns=lr-$LAB-c$((k + 1))
      timeout $((SECS + 20)) ip netns exec "$ns" iperf3 -c 198.18.1.1 -p 520$k -t "$SECS" -O 3 -J \
        > "$out/rack-ip.$r.$k.json" & cpids+=($!)
    done
    for p in "${cpids[@]}" "${spids[@]}"; do wait "$p" || true; done
  done
  $LR lab down $LAB >/dev/null
  fi
fi

if [ -z "$ONLY" ] || [ "$ONLY" = coord ]; then
  echo "bench-token-$$" > "$out/token"
  for a in 127.0.0.1 127.0.0.3 127.0.0.4; do
    $LR serve --listen $a:0 --token-file "$out/token" --quiet > "$out/agent-$a.txt" &
    pids+=($!)
  done
  sleep 0.5
  port() { awk '{print $NF}' "$out/agent-$1.txt" | cut -d: -f2; }
  cat > "$out/hosts.toml" <<EOF
[defaults]
token_file = "$out/token"
[[host]]
name = "sut"
address = "127.0.0.1"
port = $(port 127.0.0.1)
[[host]]
name = "d1"
address = "127.0.0.3"
port = $(port 127.0.0.3)
[[host]]
name = "d2"
address = "127.0.0.4"
port = $(port 127.0.0.4)
EOF
  for r in $(seq 1 "$ROUNDS"); do
    for c in d1,d2 d1; do
      $LR run stream --hosts "$out/hosts.toml" --clients $c --servers sut -F 4 -d "$SECS" --warmup 1 -q \
        --json "$out/coord-${c/,/}.$r.json" >/dev/null
    done
  done
fi

python3 - "$out" "$ROUNDS" <<'PY'
import glob, json, os, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def med(v): return f"{statistics.median(v):.3f} ({min(v):.3f}-{max(v):.3f})"
if os.path.exists(f"{out}/rack-lr.1.json"):
    lr, ip = [], []
    for r in range(1, rounds + 1):
        lr.append(json.load(open(f"{out}/rack-lr.{r}.json"))["summary"]["throughput_bps"] / 1e9)
        ip.append(sum(json.load(open(f))["end"]["sum_received"]["bits_per_second"]
                      for f in glob.glob(f"{out}/rack-ip.{r}.*.json")) / 1e9)
    ratios = [a / b for a, b in zip(lr, ip)]
    print("\n| rack, 4 clients x 1 Gbit/s, 1 ms | Gbit/s (median, min-max) |")
    print("|---|---|")
    print(f"| linerate, 4 flows over 4 client agents | {med(lr)} |")
    print(f"| 4 x iperf3 at once, summed | {med(ip)} |")
    print(f"| ratio per round | {' '.join(f'{x:.3f}' for x in ratios)} |")
if os.path.exists(f"{out}/coord-d1d2.1.json"):
    two, one, skew = [], [], []
    for r in range(1, rounds + 1):
        a = json.load(open(f"{out}/coord-d1d2.{r}.json"))
        b = json.load(open(f"{out}/coord-d1.{r}.json"))
        two.append(a["summary"]["throughput_bps"] / 1e9)
        one.append(b["summary"]["throughput_bps"] / 1e9)
        skew.append(a["iterations"][0]["start_skew_us"])
    ratios = [a / b for a, b in zip(two, one)]
    print("\n| loopback, 4 flows into one server agent | Gbit/s (median, min-max) |")
    print("|---|---|")
    print(f"| 2 client agents | {med(two)} |")
    print(f"| 1 client agent | {med(one)} |")
    print(f"| ratio per round | {' '.join(f'{x:.3f}' for x in ratios)} |")
    print(f"| edge skew, 2 clients (µs) | {' '.join(f'{x:.1f}' for x in skew)} |")
PY
