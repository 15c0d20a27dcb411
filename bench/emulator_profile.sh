#!/usr/bin/env bash
# Where the lab emulator's CPU goes: brings up a lab, runs one linerate
# stream through it, records the `lab emulate` process with perf
# (software cpu-clock, call graphs) mid-run, and splits its samples into
# what the kernel does inside its verdict calls (forwarding and delivering
# released packets), sleeping and waking in epoll, reading the queues, and
# its own code.
# Usage: bench/emulator_profile.sh [LAB OPTIONS...]   (root; run alone)
#   default: --rtt 50ms --rate 1gbit (GSO); e.g. add --per-packet
#   LR=path/to/linerate measures that build instead of building this tree.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${LR:-}" ]; then
  LR=./target/release/linerate
  cargo build --release -q
fi
ARGS=("$@")
[ ${#ARGS[@]} -eq 0 ] && ARGS=(--rtt 50ms --rate 1gbit)
out=$(mktemp -d)
LAB=prof$$
trap '$LR lab down $LAB >/dev/null 2>&1 || true; rm -rf "$out"' EXIT
$LR lab up $LAB "${ARGS[@]}" --no-calibrate >/dev/null
$LR run stream --lab $LAB -d 10 --warmup 2 -q --json "$out/r.json" >/dev/null &
RUN=$!
sleep 4
EMU=$(python3 -c "import json; print(json.load(open('/run/linerate/labs/$LAB.json'))['emulator']['pid'])" 2>/dev/null \
  || pgrep -f "lab emulate.*labs/$LAB.emulator.json" | head -1)
perf record -q -e cpu-clock -F 2999 -g -p "$EMU" -o "$out/perf.data" -- sleep 5 2>/dev/null
perf stat -x, -e context-switches,task-clock -p "$EMU" -o "$out/stat" -- sleep 2 2>/dev/null
wait $RUN
echo "lab: ${ARGS[*]}; machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, kernel $(uname -r)"
python3 - "$out/r.json" "$out/stat" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); e = r['lab']['emulator']
pk = sum(d['packets'] for d in e['dirs'])
secs = r['spec'].get('duration_s') or 10
st = {}
for line in open(sys.argv[2]):
    f = line.strip().split(',')
    if len(f) > 2 and f[0] and f[0][0].isdigit():
        st[f[2]] = float(f[0])
print(f"throughput {r['summary']['throughput_bps']/1e9:.3f} Gbit/s, emulator {e.get('cpu_pct', 0):.1f}% of a core, "
      f"{pk} packets over the window, {st.get('context-switches', 0)/2:.0f} wake-ups/s")
PY
# Children-inclusive shares of the entry points that matter.
perf report -i "$out/perf.data" --children --sort sym --stdio -g none 2>/dev/null \
  | python3 -c "
import re, sys
want = {
  'nfqnl_recv_verdict_batch': 'verdicts: the kernel forwards and delivers released packets',
  'tcp_v4_rcv': '  of which: the receivers\' TCP',
  'sock_def_readable': '  of which: waking the receiving processes',
  'nfqnl_enqueue_packet': '  of which: packets queued again in the same softirq',
  'do_epoll_wait': 'sleeping and waking in epoll',
  'do_recvmmsg': 'reading the queues (recvmmsg)',
}
seen = {}
for line in sys.stdin:
    m = re.match(r'\s*([\d.]+)%\s+([\d.]+)%\s+\[(.)\]\s+(\S+)', line)
    if not m: continue
    children, self_, kind, sym = float(m.group(1)), float(m.group(2)), m.group(3), m.group(4)
    if sym in want and sym not in seen: seen[sym] = children
    if kind == '.': seen['user'] = seen.get('user', 0) + self_
for sym, text in want.items():
    print(f'{seen.get(sym, 0):6.1f}%  {text}')
print(f\"{seen.get('user', 0):6.1f}%  user space (linerate's own code and libc)\")
"
