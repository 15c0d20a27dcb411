#!/usr/bin/env bash
# Soak: one agent serving TESTS back-to-back tests from two controllers at
# once (every workload, clear and TLS), then one rr test of LONG seconds
# with --interval 1. The agent's RSS, open descriptors and threads are
# sampled every SAMPLE seconds into soak.csv; at the end each gets its
# least-squares slope per hour, and every test must have passed.
# During the long run, from its 5th minute, FLOOD seconds of unauthenticated
# connections (bench/flood.py: 300 idle, 16 trickling, 50 new a second)
# while a third controller runs short tests back to back: each must pass,
# and the slowest is reported.
#   bench/soak.sh                      # 1,000 tests, then a 1-hour rr (20 min of it flooded)
#   TESTS=100 LONG=300 SAMPLE=10 FLOOD=60 bench/soak.sh   # a quick look
set -euo pipefail
cd "$(dirname "$0")/.."
TESTS=${TESTS:-1000}; LONG=${LONG:-3600}; SAMPLE=${SAMPLE:-60}; FLOOD=${FLOOD:-1200}
out=${OUT:-$(mktemp -d /tmp/linerate-soak.XXXX)}; mkdir -p "$out"
cargo build --release -q
# A copy: a rebuild during an hour-long soak must not swap the binary the
# controllers start.
cp target/release/linerate "$out/linerate"; lr="$out/linerate"
tok="$out/token"; (umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$tok")
# The cap counts the warm-up too: leave room above the long run.
"$lr" serve --listen 127.0.0.1:0 --token-file "$tok" --max-duration "$((LONG + 300))s" -q > "$out/agent.out" 2> "$out/agent.err" &
agent=$!
trap 'kill $sampler 2>/dev/null; kill $agent 2>/dev/null; wait 2>/dev/null' EXIT
for _ in $(seq 100); do grep -q listening "$out/agent.out" && break; sleep 0.1; done
addr=$(awk '{print $NF}' "$out/agent.out")
# Each sample names its phase (idle, tests, long, after) so the slope of the
# long run is not bent by the step from an idle agent to a busy one.
echo "t_s,phase,rss_kib,fds,threads" > "$out/soak.csv"
echo idle > "$out/phase"
t0=$(date +%s)
( while kill -0 $agent 2>/dev/null; do
    rss=$(awk '/VmRSS/{print $2}' /proc/$agent/status)
    thr=$(awk '/Threads/{print $2}' /proc/$agent/status)
    fds=$(ls /proc/$agent/fd | wc -l)
    echo "$(( $(date +%s) - t0 )),$(cat "$out/phase"),$rss,$fds,$thr" >> "$out/soak.csv"
    sleep "$SAMPLE"
  done ) &
sampler=$!
tests=("stream" "rr" "crr" "udp-stream" "udp-rr" "tls-handshake" "stream --tls" "rr --tls" "crr --tls")
command -v memcached >/dev/null && tests+=("memcache --service memcached")
controller() {  # $1: which, $2: how many
  local fails=0
  for i in $(seq "$2"); do
    local t=${tests[$(( (i + $1) % ${#tests[@]} ))]}
    if ! "$lr" run $t -d 1 --warmup 0.2 -q --agent "$addr" --token-file "$tok" \
         >> "$out/ctl$1.out" 2>> "$out/ctl$1.err"; then
      fails=$((fails + 1)); echo "test $i ($t) failed" >> "$out/ctl$1.err"
    fi
  done
  echo "$fails" > "$out/ctl$1.fails"
}
echo tests > "$out/phase"
controller 0 $((TESTS / 2)) & c0=$!
controller 1 $((TESTS - TESTS / 2)) & c1=$!
wait $c0 $c1
echo long > "$out/phase"
flooded() {  # the flood, and short tests beside it, timed
  sleep $(( LONG > 600 ? 300 : LONG / 4 ))
  echo flood > "$out/phase"
  python3 bench/flood.py "$addr" "$FLOOD" > "$out/flood.out" 2>&1 &
  local flood=$! fails=0 n=0 slowest=0
  local until=$(( $(date +%s) + FLOOD - 5 ))
  sleep 3
  while [ "$(date +%s)" -lt "$until" ]; do
    local s0; s0=$(date +%s%N)
    if ! "$lr" run rr -d 1 --warmup 0.2 -q --agent "$addr" --token-file "$tok" \
         >> "$out/ctl2.out" 2>> "$out/ctl2.err"; then fails=$((fails + 1)); fi
    local ms=$(( ($(date +%s%N) - s0) / 1000000 ))
    [ "$ms" -gt "$slowest" ] && slowest=$ms
    n=$((n + 1))
  done
  wait $flood || true
  echo long > "$out/phase"
  echo "$n $fails $slowest" > "$out/ctl2.result"
}
[ "$FLOOD" -gt 0 ] && { flooded & flooder=$!; }
"$lr" run rr -d "$LONG" --interval 1 -q --agent "$addr" --token-file "$tok" \
  --json "$out/long.json" > "$out/long.out" 2>> "$out/long.err" && long=ok || long=FAILED
[ "$FLOOD" -gt 0 ] && wait "$flooder"
echo after > "$out/phase"
sleep "$SAMPLE"
fails=$(( $(cat "$out/ctl0.fails") + $(cat "$out/ctl1.fails") ))
echo "machine: $(nproc) CPUs, $(uname -r); folder $out"
echo "tests: $TESTS back-to-back from 2 controllers, $fails failed; ${LONG}s rr: $long"
flood_fails=0
if [ "$FLOOD" -gt 0 ]; then
  read -r n flood_fails slowest < "$out/ctl2.result"
  echo "during ${FLOOD}s of flood: $n tests of 1.2 s from a third controller, $flood_fails failed, slowest ${slowest} ms start to exit"
  cat "$out/flood.out"
fi
python3 - "$out/soak.csv" <<'PY'
import csv, sys
all_rows = list(csv.DictReader(open(sys.argv[1])))
def slope(t, y):
    n = len(y); mt = sum(t) / n; my = sum(y) / n
    var = sum((a - mt) ** 2 for a in t) or 1.0
    return sum((a - mt) * (b - my) for a, b in zip(t, y)) / var * 3600
for phase in ("tests", "long", "flood", "all"):
    rows = [r for r in all_rows if phase == "all" or r["phase"] == phase]
    if len(rows) < 2:
        continue
    t = [float(r["t_s"]) for r in rows]
    print(f"{phase}: {len(rows)} samples, t={t[0]:.0f}..{t[-1]:.0f} s")
    for k in ("rss_kib", "fds", "threads"):
        y = [float(r[k]) for r in rows]
        print(f"  {k:8} first {y[0]:>8.0f}  last {y[-1]:>8.0f}  min {min(y):>8.0f}  max {max(y):>8.0f}  slope {slope(t, y):+.1f}/hour")
PY
[ "$fails" -eq 0 ] && [ "$long" = ok ] && [ "$flood_fails" -eq 0 ]
