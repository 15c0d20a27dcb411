#!/usr/bin/env bash
# What a stream sender does per GB, linerate against iperf3, per write size:
# syscalls by kind, how each write returned (whole, partial, EAGAIN), epoll
# or select waits, context switches and CPU. Counted with perf's syscall
# tracepoints on the client process only (each tool's server runs apart),
# so the kernel is not slowed the way strace's ptrace would slow it.
# Usage: bench/senders.sh [ROUNDS] [SECONDS] [SIZES...]   (root; run alone)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
SECS=${2:-4}
shift 2 || true
SIZES=("${@:-16K 64K 128K 1M}")
# shellcheck disable=SC2206
SIZES=(${SIZES[@]})
LR=./target/release/linerate
cargo build --release -q
out=$(mktemp -d)
echo "token-$$-$RANDOM" > "$out/token"
$LR serve --listen 127.0.0.1:7479 --token-file "$out/token" -q & AGENT=$!
iperf3 -s -p 5279 -D --pidfile "$out/iperf3.pid" >/dev/null
trap 'kill $AGENT 2>/dev/null; kill "$(cat "$out/iperf3.pid")" 2>/dev/null; rm -rf "$out"' EXIT
sleep 0.5

EV='syscalls:sys_enter_sendto,syscalls:sys_enter_write,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_pselect6,syscalls:sys_enter_select,syscalls:sys_enter_recvfrom,syscalls:sys_enter_read,syscalls:sys_enter_clock_gettime,context-switches,cpu-clock'
REC='syscalls:sys_exit_sendto,syscalls:sys_exit_write'

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, kernel $(uname -r); linerate $(git log -1 --format=%h) $(git diff --quiet HEAD || echo modified), $(iperf3 --version | head -1)"
echo "per GB sent by the client; write returns: whole / partial / EAGAIN as % of write calls"
printf '%-5s %-9s %8s %10s %9s %7s %7s %7s %9s %8s %8s\n' size tool Gbit/s writes/GB "avg KiB" whole% part% again% waits/GB cs/GB "cpu s/GB"

run_one() { # tool size
  local tool=$1 m=$2
  if [ "$tool" = linerate ]; then
    perf record -q -o "$out/rec" -e "$REC" -- perf stat -x, -o "$out/stat" -e "$EV" -- \
      $LR run stream -m "$m" -d "$SECS" --warmup 1 --agent 127.0.0.1:7479 \
      --token-file "$out/token" -q --json "$out/r.json" >/dev/null 2>&1
    python3 -c "
import json;r=json.load(open('$out/r.json'));it=r['iterations'][0]
print(sum(f['bytes_tx'] for f in it['flows']['client']), r['summary']['throughput_bps'])" > "$out/bytes"
  else
    perf record -q -o "$out/rec" -e "$REC" -- perf stat -x, -o "$out/stat" -e "$EV" -- \
      iperf3 -c 127.0.0.1 -p 5279 -l "$m" -t "$SECS" -O 1 -J > "$out/r.json" 2>/dev/null
    python3 -c "
import json;r=json.load(open('$out/r.json'))
# Every interval, the omitted warm-up too: the syscalls counted cover all of it.
sent = sum(i['sum']['bytes'] for i in r['intervals'])
print(sent, r['end']['sum_received']['bits_per_second'])" > "$out/bytes"
  fi
  perf script -i "$out/rec" -F event,trace 2>/dev/null | python3 -c "
import sys, re
size = int(sys.argv[1])
whole = part = again = other = total = 0
for line in sys.stdin:
    m = re.search(r'0x([0-9a-f]+)|ret: (-?\d+)', line)
    if not m: continue
    v = int(m.group(1), 16) if m.group(1) else int(m.group(2))
    if v >= 1 << 63: v -= 1 << 64
    total += 1
    if v == -11: again += 1
    elif v == size: whole += 1
    elif v > 0: part += 1
    else: other += 1
print(total, whole, part, again)
" "$(python3 -c "print(int('${m%K}') * 1024 if '$m'.endswith('K') else int('${m%M}') << 20)")" > "$out/rets"
  python3 - "$out/stat" "$out/bytes" "$out/rets" "$tool" "$m" <<'EOF'
import sys
stat = {}
for line in open(sys.argv[1]):
    f = line.strip().split(',')
    if len(f) > 2 and f[0] and f[0][0].isdigit():
        stat[f[2]] = float(f[0])
sent, bps = (float(x) for x in open(sys.argv[2]).read().split())
total, whole, part, again = (int(x) for x in open(sys.argv[3]).read().split())
gb = sent / 1e9
g = lambda k: stat.get(k, 0.0)
writes = g('syscalls:sys_enter_sendto') + g('syscalls:sys_enter_write')
waits = g('syscalls:sys_enter_epoll_wait') + g('syscalls:sys_enter_pselect6') + g('syscalls:sys_enter_select')
pct = lambda x: 100.0 * x / max(total, 1)
print('%-5s %-9s %8.2f %10.0f %9.1f %7.1f %7.1f %7.1f %9.0f %8.0f %8.3f' % (
    sys.argv[5], sys.argv[4], bps / 1e9, writes / gb, sent / max(writes - again, 1) / 1024,
    pct(whole), pct(part), pct(again), waits / gb, g('context-switches') / gb, g('cpu-clock') / 1e3 / gb))
EOF
}

for r in $(seq 1 "$ROUNDS"); do
  for m in "${SIZES[@]}"; do
    if [ $((r % 2)) = 1 ]; then order="linerate iperf3"; else order="iperf3 linerate"; fi
    for tool in $order; do run_one "$tool" "$m"; done
  done
done
