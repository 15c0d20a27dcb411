#!/usr/bin/env bash
# Syscalls per crr transaction, both ends (system-wide, so run alone): linerate against netperf
# TCP_CRR (both against a server started apart), counted with perf's syscall
# tracepoints, and transactions/s. Usage: bench/crr_syscalls.sh [SECONDS] [LINERATE...]
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-4}; shift || true
BINS=("${@:-./target/release/linerate}")
eval "$(bench/peers.sh --env)"
out=$(mktemp -d)
echo "tok-$$" > "$out/token"
"$NETSERVER" -p 12869 >/dev/null 2>&1
agents=()
trap 'kill ${agents[*]} 2>/dev/null; pkill -f "netserver -p 12869"; rm -rf "$out"' EXIT
calls=(accept4 accept socket connect setsockopt getsockopt getpeername fcntl ioctl epoll_ctl epoll_wait writev write sendto read recvfrom close shutdown)
ev="raw_syscalls:sys_enter,context-switches"
for c in "${calls[@]}"; do ev="$ev,syscalls:sys_enter_$c"; done
report() { # name transactions
  python3 - "$out/stat" "$1" "$2" <<'P'
import sys
st = {}
for l in open(sys.argv[1]):
    f = l.strip().split(',')
    if len(f) > 2 and f[0] and f[0][0].isdigit():
        st[f[2].replace('syscalls:sys_enter_', '')] = float(f[0])
tx = float(sys.argv[3])
parts = " ".join("%s %.2f" % (k, v / tx) for k, v in st.items()
                 if k not in ('raw_syscalls:sys_enter', 'context-switches') and v / tx >= 0.05)
print("%-10s %8.0f tx  syscalls/tx %.2f  cs/tx %.2f  | %s" % (
    sys.argv[2], tx, st['raw_syscalls:sys_enter'] / tx, st['context-switches'] / tx, parts))
P
}
for i in "${!BINS[@]}"; do
  b=${BINS[$i]}
  port=$((7490 + i))
  "$b" serve --listen 127.0.0.1:$port --token-file "$out/token" -q & agents+=($!)
  sleep 0.3
  perf stat -a -x, -o "$out/stat" -e "$ev" -- "$b" run crr --request 64 --response 8192 -d "$SECS" --warmup 1 \
    --agent 127.0.0.1:$port --token-file "$out/token" -q --json "$out/r.json" >/dev/null
  tx=$(python3 -c "import json;i=json.load(open('$out/r.json'))['iterations'][0];print(sum(f['transactions'] for f in i['flows']['client']) or i['transactions'])")
  report "lr$i" "$tx"
done
perf stat -a -x, -o "$out/stat" -e "$ev" -- "$NETPERF" -P 0 -H 127.0.0.1 -p 12869 -l "$SECS" -t TCP_CRR -- -r 64,8192 -o THROUGHPUT > "$out/np"
report netperf "$(python3 -c "print(float(open('$out/np').read()) * $SECS)")"
