#!/usr/bin/env bash
# Emulator capacity and cost (run alone, as root: nothing else busy).
# Usage: bench/lab.sh [ROUNDS] [SECONDS]
#   LR=path/to/linerate bench/lab.sh ...   measures that binary (an earlier
#   build, for an A/B) instead of building this tree
# Interleaved rounds over these labs, each a fresh `linerate lab up`:
#   plain      no emulator, plain veth forwarding through the router
#   cap-gso    emulator with no delay and no rate limit (its capacity), GSO
#   cap-pkt    the same, per packet
#   1g-50-gso  1 Gbit/s, 50 ms RTT, GSO       1g-50-pkt  per packet
#   1g-100-gso 1 Gbit/s, 100 ms RTT, GSO      1g-100-pkt per packet
#   1g-50-codel, 1g-50-fq   1 Gbit/s, 50 ms RTT, GSO, --aqm codel / fq_codel
#   1g-50-fq4, 1g-50-gso4   the same with fq_codel / drop-tail and 4 flows
#   10g-1-gso, 10g-1-gso4   10 Gbit/s, 1 ms RTT, GSO, 1 and 4 flows (the
#                           seeds' 10 GbE: does one flow reach the rate?)
#   10g-1-nic               10 Gbit/s, 1 ms, the hosts' NICs at the link's
#                           rate (--nic-rate link: no burst reaches the
#                           router faster than the link drains)
#   1g-50-gso-off, 1g-50-gso4-off, 10g-1-gso-off, 10g-1-gso4-off
#                           the same with --emulator-cpu off (unplaced: the
#                           A/B of the default placement)
# ORDER="1g-50-gso 1g-50-fq" bench/lab.sh 3 6   runs only those, in that order.
# OLD=path/to/linerate bench/lab.sh ...   A/B: each lab also runs with that
#   build, right before or after this one (the order turns every round);
#   its rows are marked "(old)", and a last table gives new / old per lab.
# and one linerate stream per lab (1 flow; 4 flows for the capacity labs),
# reporting throughput, the emulator's CPU (share of one core, and per
# wire packet: its CPU time over the frames both directions carried),
# releases more than 1 ms late, and host CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
SECS=${2:-6}
if [ -z "${LR:-}" ]; then
  LR=./target/release/linerate
  cargo build --release -q
fi
out=$(mktemp -d)
LAB=bench$$
trap '$LR lab down $LAB >/dev/null 2>&1 || true; rm -rf "$out"' EXIT

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, kernel $(uname -r)"
echo "rounds=$ROUNDS seconds=$SECS (warm-up 2 s excluded)"

declare -A LINK=(
  [plain]="--emulator none"
  [cap-gso]=""
  [cap-pkt]="--per-packet"
  [1g-50-gso]="--rtt 50ms --rate 1gbit"
  [1g-50-pkt]="--rtt 50ms --rate 1gbit --per-packet"
  [1g-100-gso]="--rtt 100ms --rate 1gbit"
  [1g-100-pkt]="--rtt 100ms --rate 1gbit --per-packet"
  [1g-50-codel]="--rtt 50ms --rate 1gbit --aqm codel"
  [1g-50-fq]="--rtt 50ms --rate 1gbit --aqm fq_codel"
  [1g-50-fq4]="--rtt 50ms --rate 1gbit --aqm fq_codel"
  [1g-50-gso4]="--rtt 50ms --rate 1gbit"
  [10g-1-gso]="--rtt 1ms --rate 10gbit"
  [10g-1-gso4]="--rtt 1ms --rate 10gbit"
  [10g-1-nic]="--rtt 1ms --rate 10gbit --nic-rate link"
  [1g-50-gso-off]="--rtt 50ms --rate 1gbit --emulator-cpu off"
  [1g-50-gso4-off]="--rtt 50ms --rate 1gbit --emulator-cpu off"
  [10g-1-gso-off]="--rtt 1ms --rate 10gbit --emulator-cpu off"
  [10g-1-gso4-off]="--rtt 1ms --rate 10gbit --emulator-cpu off"
)
ORDER=${ORDER:-"plain cap-gso cap-pkt 1g-50-gso 1g-50-pkt 1g-100-gso 1g-100-pkt 1g-50-codel 1g-50-fq"}

# One lab, one stream: run_lab BINARY KEY RESULT.json
run_lab() {
  local bin=$1 k=$2 json=$3 flows=1
  # shellcheck disable=SC2086
  $bin lab up $LAB ${LINK[$k]} --no-calibrate >/dev/null
  case $k in plain|cap-*|*4|*4-off) flows=4 ;; esac
  $bin run stream --lab $LAB -F $flows -d "$SECS" --warmup 2 -q --json "$json" >/dev/null
  $bin lab down $LAB >/dev/null
}

KEYS=$ORDER
[ -n "${OLD:-}" ] && KEYS=$(for k in $ORDER; do printf '%s %s@old ' "$k" "$k"; done)
for r in $(seq 1 "$ROUNDS"); do
  for k in $ORDER; do
    if [ -z "${OLD:-}" ]; then
      run_lab "$LR" "$k" "$out/$k.$r.json"
    elif [ $((r % 2)) -eq 1 ]; then
      run_lab "$OLD" "$k" "$out/$k@old.$r.json"
      run_lab "$LR" "$k" "$out/$k.$r.json"
    else
      run_lab "$LR" "$k" "$out/$k.$r.json"
      run_lab "$OLD" "$k" "$out/$k@old.$r.json"
    fi
  done
done

# shellcheck disable=SC2086
python3 - "$out" "$ROUNDS" $KEYS <<'PY'
import json, statistics, sys
out, rounds, order = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
medians = {}
print("| lab | flows | throughput Gbit/s (median, min-max) | emulator CPU % of a core | emulator µs per wire packet | late > 1 ms | host CPU % |")
print("|---|---|---|---|---|---|---|")
for k in order:
    rs = [json.load(open(f"{out}/{k}.{i}.json")) for i in range(1, rounds + 1)]
    t = [r["summary"]["throughput_bps"] / 1e9 for r in rs]
    emu = [((r.get("lab") or {}).get("emulator") or {}).get("cpu_pct") for r in rs]
    emu = [e for e in emu if e is not None]
    late = [sum(d.get("late", 0) for d in r["lab"]["emulator"]["dirs"]) for r in rs if r["lab"].get("emulator")]
    pk = [sum(d.get("packets", 0) for d in r["lab"]["emulator"]["dirs"]) for r in rs if r["lab"].get("emulator")]
    host = [r["summary"]["cpu"]["client"]["host_util_pct"] for r in rs]
    # The emulator's CPU time over the frames it carried (both directions).
    per = []
    for r in rs:
        e = (r.get("lab") or {}).get("emulator") or {}
        seg = sum(d.get("segments", 0) for d in e.get("dirs", []))
        if e.get("cpu_pct") is not None and e.get("elapsed_s") and seg:
            per.append(e["cpu_pct"] / 100 * e["elapsed_s"] * 1e6 / seg)
    pp = f"{statistics.median(per):.2f} ({min(per):.2f}-{max(per):.2f})" if per else "-"
    e = f"{statistics.median(emu):.0f} ({min(emu):.0f}-{max(emu):.0f})" if emu else "-"
    l = f"{sum(late)} of {sum(pk)}" if pk else "-"
    medians[k] = (statistics.median(t), statistics.median(per) if per else None, per)
    name = k.replace("@old", " (old)")
    print(f"| {name} | {rs[0]['spec']['flows']} | {statistics.median(t):.3f} ({min(t):.3f}-{max(t):.3f}) | {e} | {pp} | {l} | {statistics.median(host):.0f} |")
olds = [k for k in order if k.endswith("@old")]
if olds:
    print()
    print("| lab | throughput new / old | emulator µs per wire packet new / old (per round) |")
    print("|---|---|---|")
    for o in olds:
        k = o[:-4]
        (tn, pn, rn), (to, po, ro) = medians[k], medians[o]
        pr = f"{pn / po:.3f}" if pn and po else "-"
        if len(rn) == len(ro) and rn:
            pr += " (" + " ".join(f"{a / b:.2f}" for a, b in zip(rn, ro)) + ")"
        print(f"| {k} | {tn / to:.3f} | {pr} |")
PY
