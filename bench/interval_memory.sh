#!/usr/bin/env bash
# An agent's memory over one long test with many intervals, for each binary
# given (A/B: an older build beside this one). The agent streams every
# interval to its controller as it closes; what it still holds per interval
# shows as RSS growing with the test. Its RSS is sampled every second; the
# line per binary gives RSS before the test, at the window's end, after,
# and the least-squares slope over the window in KiB per 1,000 intervals.
#   bench/interval_memory.sh [SECONDS] [INTERVAL] BINARY...
#   bench/interval_memory.sh 180 0.05 /tmp/old/linerate target/release/linerate
set -euo pipefail
secs=${1:-180}; iv=${2:-0.05}; shift 2 || true
[ $# -gt 0 ] || set -- target/release/linerate
for lr in "$@"; do
  out=$(mktemp -d /tmp/linerate-ivmem.XXXX)
  "$lr" serve --listen 127.0.0.1:0 -q > "$out/agent.out" 2> "$out/agent.err" &
  agent=$!
  for _ in $(seq 100); do grep -q listening "$out/agent.out" && break; sleep 0.1; done
  addr=$(awk '{print $NF}' "$out/agent.out")
  rss() { awk '/VmRSS/{print $2}' /proc/$agent/status; }
  before=$(rss)
  "$lr" run rr -d "$secs" --warmup 2 --interval "$iv" -q --agent "$addr" > "$out/run.out" 2>&1 &
  run=$!
  t0=$(date +%s.%N)
  : > "$out/rss"
  while kill -0 $run 2>/dev/null; do
    echo "$(date +%s.%N) $(rss)" >> "$out/rss"
    sleep 1
  done
  wait $run || { echo "$lr: the test failed, see $out/run.out" >&2; kill $agent; exit 1; }
  sleep 2
  after=$(rss)
  kill $agent; wait $agent 2>/dev/null || true
  # The window: from the end of warm-up (+2 s) to its end.
  awk -v t0="$t0" -v w0=4 -v w1="$secs" -v iv="$iv" -v b="$before" -v a="$after" -v lr="$lr" '
    { $1 -= t0 }
    $1 >= w0 && $1 <= w1 + 2 { n++; sx += $1; sy += $2; sxx += $1*$1; sxy += $1*$2; last = $2 }
    END {
      slope = (n * sxy - sx * sy) / (n * sxx - sx * sx)   # KiB per second
      printf "%-40s before %6d KiB  window end %6d KiB  after %6d KiB  slope %6.1f KiB per 1,000 intervals\n",
        lr, b, last, a, slope * iv * 1000
    }' "$out/rss"
  rm -rf "$out"
done
