#!/usr/bin/env bash
# `linerate run http` beside h2load (nghttp2-client) and wrk, the HTTP load
# generators people know, against one nginx (Debian's nginx-light, one
# worker, keepalive_requests high so no client reconnects) on loopback:
# same connections, same requests in flight, interleaved rounds. nginx is
# the bottleneck on purpose: with the server the same, a client that
# reports less (or more) is the one to doubt. Printed per round: each
# client's requests/s and p50 latency, and linerate's ratio to each.
#
# Paths: HTTP/1.1 (wrk, h2load --h1) and HTTP/2 in clear (h2load h2c; with
# --outstanding 8 streams each), a 1 KiB and a 64 KiB object.
#
# Usage: bench/http.sh [ROUNDS] [SECONDS]   (run alone; default 3 rounds, 5 s)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
SECS=${2:-5}
LR=./target/release/linerate
cargo build --release -q
for c in nginx h2load wrk; do
  command -v "$c" >/dev/null || { echo "missing $c: apt install nginx-light nghttp2-client wrk" >&2; exit 1; }
done
D=$(mktemp -d /tmp/http-bench-XXXXXX)
ngx=""
cleanup() {
  [ -n "$ngx" ] && kill "$ngx" 2>/dev/null || true
  rm -rf "$D"
}
trap cleanup EXIT
mkdir -p "$D/www"
head -c 1024 /dev/zero > "$D/www/1k"
head -c 65536 /dev/zero > "$D/www/64k"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
H1=$(port); H2=$(port)
cat > "$D/nginx.conf" <<EOF
daemon off; master_process off; worker_processes 1;
pid $D/nginx.pid; error_log $D/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $D/b; proxy_temp_path $D/p; fastcgi_temp_path $D/f;
  uwsgi_temp_path $D/u; scgi_temp_path $D/s;
  keepalive_requests 100000000;
  server { listen 127.0.0.1:$H1; root $D/www; }
  server { listen 127.0.0.1:$H2 http2; root $D/www; }
}
EOF
nginx -p "$D" -c "$D/nginx.conf" & ngx=$!
sleep 1
echo "# $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs, kernel $(uname -r), $(nginx -v 2>&1), $(h2load --version | head -1), $(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2), cc $(cat /proc/sys/net/ipv4/tcp_congestion_control)"
lr() { # URL VERSION STREAMS -> "req/s p50_us"
  $LR run http --http-url "$1" --http-version "$2" -F 4 --outstanding "$3" -d "$SECS" --warmup 1 -q --json "$D/lr.json" >/dev/null
  python3 -c "import json; s=json.load(open('$D/lr.json'))['summary']; print(round(s['transactions_per_s']), round(s['latency_us']['p50']))"
}
h2l() { # URL STREAMS [--h1] -> "req/s p50_us"
  h2load -c 4 -m "$2" -D "$SECS" --warm-up-time 1 ${3:-} "$1" 2>/dev/null | python3 -c '
import re,sys
t=sys.stdin.read()
rate=re.search(r"finished in [0-9.]+s, ([0-9.]+) req/s",t).group(1)
# "time for request:  min max mean sd": h2load reports no median.
m=re.search(r"time for request:\s+(\S+)\s+(\S+)\s+(\S+)",t).group(3)
us=float(m[:-2])*(1000 if m.endswith("ms") else 1) if m.endswith("s") else float(m)
print(round(float(rate)), round(us))'
}
wrk1() { # URL -> "req/s p50_us"
  wrk -t 1 -c 4 -d "${SECS}s" --latency "$1" 2>/dev/null | python3 -c '
import re,sys
t=sys.stdin.read()
rate=re.search(r"Requests/sec:\s+([0-9.]+)",t).group(1)
m=re.search(r"50%\s+([0-9.]+)(us|ms|s)",t)
us=float(m.group(1))*{"us":1,"ms":1e3,"s":1e6}[m.group(2)]
print(round(float(rate)), round(us))'
}
printf "%-22s %5s %12s %12s %12s %8s %8s\n" path round linerate h2load wrk lr/h2load lr/wrk
for r in $(seq 1 "$ROUNDS"); do
  for obj in 1k 64k; do
    u1="http://127.0.0.1:$H1/$obj"; u2="http://127.0.0.1:$H2/$obj"
    # Interleaved: each peer right after linerate, the order turned each round.
    if [ $((r % 2)) = 1 ]; then a=$(lr "$u1" 1.1 1); b=$(h2l "$u1" 1 --h1); c=$(wrk1 "$u1")
    else c=$(wrk1 "$u1"); b=$(h2l "$u1" 1 --h1); a=$(lr "$u1" 1.1 1); fi
    python3 - "$obj" "$r" "$a" "$b" "$c" <<'PY'
import sys
obj,r,a,b,c=sys.argv[1:]
a,b,c=[list(map(float,x.split())) for x in (a,b,c)]
print(f"{'HTTP/1.1 '+obj:<22} {r:>5} {a[0]:>8.0f}/{a[1]:<4.0f}{b[0]:>8.0f}/{b[1]:<4.0f}{c[0]:>8.0f}/{c[1]:<4.0f}{a[0]/b[0]:>8.2f} {a[0]/c[0]:>8.2f}")
PY
    if [ $((r % 2)) = 1 ]; then a=$(lr "$u2" 2 8); b=$(h2l "$u2" 8); else b=$(h2l "$u2" 8); a=$(lr "$u2" 2 8); fi
    python3 - "$obj" "$r" "$a" "$b" <<'PY'
import sys
obj,r,a,b=sys.argv[1:]
a,b=[list(map(float,x.split())) for x in (a,b)]
print(f"{'HTTP/2 x8 '+obj:<22} {r:>5} {a[0]:>8.0f}/{a[1]:<4.0f}{b[0]:>8.0f}/{b[1]:<4.0f}{'-':>13}{a[0]/b[0]:>8.2f} {'-':>8}")
PY
  done
done
echo "# requests/s / latency in µs (linerate and wrk: p50; h2load: mean, it reports no median)"
