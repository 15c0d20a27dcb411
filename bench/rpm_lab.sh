#!/usr/bin/env bash
# Responsiveness (RPM) through the lab, two clients on one path, against
# one server: linerate's own (`run rpm --url`, draft-ietf-ippm-
# responsiveness-08) and goresponsiveness (the draft's Go client, built by
# bench/goresponsiveness.sh), each against a linerate agent's RPM server
# (`serve --rpm`, a certificate made here) in the lab's server namespace:
# a 100 Mbit/s, 20 ms link with a deep drop-tail FIFO and with fq_codel.
# Both load both directions at once (goresponsiveness -rpm.parallel). The
# idle round trip's RPM is 60,000 / 20 = 3,000.
#
# The two compute RPM differently, so the script prints each one's own
# figure and, from linerate's JSON, the draft's halves: goresponsiveness
# takes the P90 of self and foreign round trips (the foreign probe's whole
# time split in three) and averages the two round trips; linerate averages
# the foreign and self RPM from trimmed means (the draft's -08). So that
# the two can be compared like for like, the script also applies the
# draft's formula to goresponsiveness's own probes (its probe logs,
# `-logger-filename`): over the probes of its last MAD x ID seconds (the
# draft's window), the trimmed means (lowest 95%) of the foreign probes'
# round trips (each probe's time over its 3 round trips) and of the self
# probes', and RPM the mean of the two RPMs; and its ratio to linerate's
# RPM of the same round.
#
# Usage: bench/rpm_lab.sh [ROUNDS] [SECONDS]   (root; run alone; default 2 rounds, 12 s tests)
# QUEUE sets the queue's size (default 4M: deep at 100 Mbit/s, 335 ms).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-2}
SECS=${2:-12}
QUEUE=${QUEUE:-4M}
LR=./target/release/linerate
cargo build --release -q
NQ=$(bench/goresponsiveness.sh)
LAB=rpm$$
# No dot in the path: goresponsiveness inserts its log names before the
# first one.
TMPD=$(mktemp -d /tmp/rpm-lab-XXXXXX)
agent=""
cleanup() {
  [ -n "$agent" ] && kill "$agent" 2>/dev/null || true
  $LR lab down $LAB >/dev/null 2>&1 || true
  rm -rf "$TMPD"
}
trap cleanup EXIT
# A leaf certificate for the server's address (not a CA: rustls refuses a
# CA as the server's own).
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
  -subj /CN=198.18.1.1 -addext subjectAltName=IP:198.18.1.1 \
  -addext basicConstraints=critical,CA:FALSE \
  -keyout "$TMPD/key.pem" -out "$TMPD/crt.pem" 2>/dev/null
URL=https://198.18.1.1:4043/.well-known/nq
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs, kernel $(uname -r)"
echo "goresponsiveness: $(git -C "$(dirname "$NQ")" log --format='%h %cs' -1); linerate $(git log --format=%h -1)"
for r in $(seq 1 "$ROUNDS"); do
  for aqm in fifo fq_codel; do
    $LR lab up $LAB --rtt 20ms --rate 100mbit --queue "$QUEUE" --aqm "$aqm" --no-calibrate >/dev/null
    $LR serve --netns "lr-$LAB-s" --listen 127.0.0.1:0 --insecure-no-token --no-crypto-twin \
      --tls-cert "$TMPD/crt.pem" --tls-key "$TMPD/key.pem" \
      --rpm 198.18.1.1:4043 -q >/dev/null 2>&1 &
    agent=$!
    sleep 1
    rm -f "$TMPD"/gr*
    out=$(ip netns exec "lr-$LAB-c" "$NQ" -url "$URL" -rpm.parallel \
      -rpm.timeout "$SECS" -logger-filename "$TMPD/gr.csv" 2>&1 || true)
    dl=$(awk '/^Download:/ { d = 1 } d && /Throughput:/ { print $2; exit }' <<<"$out")
    ul=$(awk '/^Upload:/ { u = 1 } u && /Throughput:/ { print $2; exit }' <<<"$out")
    rpm=$(awk '/^Final RPM:.*P90/ { print $3; exit }' <<<"$out")
    trimmed=$(awk '/^Final RPM:.*Trimmed/ { print $3; exit }' <<<"$out")
    echo "round $r $aqm goresponsiveness: download ${dl:-?} Mbit/s, upload ${ul:-?} Mbit/s (binary mega), RPM ${rpm:-?} (P90), ${trimmed:-?} (its trimmed mean)"
    ip netns exec "lr-$LAB-c" $LR run rpm --url "$URL" --tls-ca "$TMPD/crt.pem" \
      --tls-name 198.18.1.1 -d $((SECS + 8)) -q --json "$TMPD/lr.json" >/dev/null 2>&1 || true
    python3 - "$TMPD/lr.json" "$r" "$aqm" "$TMPD" <<'PY'
import datetime, glob, json, sys
x = json.load(open(sys.argv[1]))["summary"]["responsiveness"]
print(f"round {sys.argv[2]} {sys.argv[3]} linerate: download {x['capacity_down_bps']/1e6:.1f} Mbit/s, "
      f"upload {x['capacity_up_bps']/1e6:.1f} Mbit/s, RPM {x['rpm']:.0f} (foreign {x['foreign_rpm']:.0f}, "
      f"self {x['self_rpm']:.0f}), confidence {x['confidence']}, idle {x['idle_rtt_us']/1e3:.1f} ms")

def probes(kind):
    # goresponsiveness's CSV: a header of the fields' descriptions, then
    # one probe a line: time, round trips, duration (s), TCP RTT, cwnd,
    # type, congestion control.
    out = []
    for f in glob.glob(f"{sys.argv[4]}/gr-{kind}-*.csv"):
        for l in open(f).read().splitlines()[1:]:
            v = [c.strip() for c in l.split(",")]
            if len(v) < 6:
                continue
            t = datetime.datetime.strptime(v[0], "%m-%d-%Y-%H-%M-%S.%f")
            out.append((t, float(v[2]) * 1e3 / int(v[1])))
    return out

def trimmed(v, pct=95.0):
    v = sorted(v)
    keep = min(max(int(len(v) * pct / 100.0), 1), len(v))
    return sum(v[:keep]) / keep

foreign, selfp = probes("foreign"), probes("self")
if foreign and selfp:
    end = max(t for t, _ in foreign + selfp)
    since = end - datetime.timedelta(seconds=4.0)  # MAD 4 x ID 1 s
    f = [ms for t, ms in foreign if t >= since]
    s = [ms for t, ms in selfp if t >= since]
    if f and s:
        fr, sr = 60000.0 / trimmed(f), 60000.0 / trimmed(s)
        rpm = (fr + sr) / 2
        print(f"round {sys.argv[2]} {sys.argv[3]} goresponsiveness's probes, the draft's formula: RPM {rpm:.0f} "
              f"(foreign {fr:.0f} from {len(f)} probes, self {sr:.0f} from {len(s)}); "
              f"linerate / this = {x['rpm'] / rpm:.2f}")
else:
    print(f"round {sys.argv[2]} {sys.argv[3]} goresponsiveness wrote no probe log")
PY
    kill "$agent" 2>/dev/null || true
    wait "$agent" 2>/dev/null || true
    agent=""
    $LR lab down $LAB >/dev/null
  done
done
