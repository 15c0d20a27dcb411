#!/usr/bin/env bash
# 64-byte UDP on loopback (issue 12), run alone: received packets/s of
#   linerate udp-stream --message 64              (1 flow, batches of 32)
#   iperf3 -u -l 64 -b 0                          (received = sent - lost)
#   neper udp_stream -B 64                        (the receiver's rate)
#   linerate udp-stream --message 64 --gso        (one UDP_SEGMENT send per batch)
# interleaved round by round, same duration, all unpinned; loss is counted
# at the receiver for all three. linerate also reports its CPU per packet.
# Usage: bench/udp.sh [ROUNDS] [SECONDS]     (peers from bench/peers.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
SECS=${2:-5}
LR=${LR:-./target/release/linerate}
[ "$LR" = ./target/release/linerate ] && cargo build --release -q
eval "$(bench/peers.sh --env)"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, kernel $(uname -r)"
echo "rounds=$ROUNDS seconds=$SECS; iperf3 $(iperf3 --version | head -1 | awk '{print $2}')"

for r in $(seq 1 "$ROUNDS"); do
  $LR run udp-stream --message 64 -d "$SECS" --warmup 1 -q --json "$out/lr.$r.json" >/dev/null
  $LR run udp-stream --message 64 --gso -d "$SECS" --warmup 1 -q --json "$out/gso.$r.json" >/dev/null
  iperf3 -s -1 -p 5311 >/dev/null 2>&1 &
  sp=$!
  sleep 0.3
  timeout $((SECS + 20)) iperf3 -c 127.0.0.1 -p 5311 -u -l 64 -b 0 -t "$SECS" -J > "$out/ip.$r.json" || true
  wait "$sp" 2>/dev/null || true
  "$NEPER/udp_stream" -B 64 -l "$SECS" --nolog > "$out/ns.$r.txt" 2>&1 &
  sp=$!
  sleep 0.3
  timeout $((SECS + 20)) "$NEPER/udp_stream" -c -H 127.0.0.1 -B 64 -l "$SECS" --nolog > "$out/nc.$r.txt" 2>&1 || true
  wait "$sp" 2>/dev/null || true
done

python3 - "$out" "$ROUNDS" <<'PY'
import json, re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
lr, ip, ne, lr_loss, ip_loss, cpp = [], [], [], [], [], []
gso, gso_loss = [], []
for r in range(1, rounds + 1):
    u = json.load(open(f"{out}/lr.{r}.json"))["summary"]["udp"]
    lr.append(u["packets_per_s"]); lr_loss.append(u["loss_pct"])
    cpp.append((u["client_us_per_packet"], u["agent_us_per_packet"]))
    g = json.load(open(f"{out}/gso.{r}.json"))["summary"]["udp"]
    gso.append(g["packets_per_s"]); gso_loss.append(g["loss_pct"])
    e = json.load(open(f"{out}/ip.{r}.json"))["end"]["sum"]
    ip.append((e["packets"] - e["lost_packets"]) / e["seconds"]); ip_loss.append(e["lost_percent"])
    t = re.search(r"remote_throughput=(\d+)", open(f"{out}/nc.{r}.txt").read())
    ne.append(int(t.group(1)) / (64 * 8) if t else float("nan"))
def med(v): return statistics.median(v)
print("\n| tool | received packets/s (median) | per round | loss % (median) |")
print("|---|---|---|---|")
print(f"| linerate udp-stream | {med(lr)/1e3:.0f}k | {' '.join(f'{x/1e3:.0f}k' for x in lr)} | {med(lr_loss):.1f} |")
print(f"| linerate udp-stream --gso | {med(gso)/1e3:.0f}k | {' '.join(f'{x/1e3:.0f}k' for x in gso)} | {med(gso_loss):.1f} |")
print(f"| iperf3 -u -b 0 | {med(ip)/1e3:.0f}k | {' '.join(f'{x/1e3:.0f}k' for x in ip)} | {med(ip_loss):.1f} |")
print(f"| neper udp_stream | {med(ne)/1e3:.0f}k | {' '.join(f'{x/1e3:.0f}k' for x in ne)} | (not reported) |")
print(f"\nlinerate / iperf3 per round: {' '.join(f'{a/b:.2f}' for a, b in zip(lr, ip))}")
print(f"linerate / neper per round:  {' '.join(f'{a/b:.2f}' for a, b in zip(lr, ne))}")
print(f"linerate --gso / iperf3 per round: {' '.join(f'{a/b:.2f}' for a, b in zip(gso, ip))}")
print(f"linerate CPU per packet (client sender, agent receiver) µs: {' '.join(f'{c:.2f}/{a:.2f}' for c, a in cpp)}")
PY
