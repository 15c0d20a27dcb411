#!/usr/bin/env bash
# TLS benchmarks on loopback, interleaved rounds (run alone: nothing else busy).
# Usage: bench/tls.sh [ROUNDS] [SECONDS]
#  1. single-flow stream, 16 KiB writes: linerate TLS 1.3 AES-256-GCM (rustls),
#     linerate clear, and `openssl s_server`/`s_client` moving bytes with the
#     same suite (goal: TLS/clear >= 0.5, linerate TLS >= openssl tools);
#  2. `linerate crypto` vs `openssl speed -evp aes-256-gcm` at 16 KiB;
#  3. handshakes/s, ECDSA P-256 vs RSA-2048, full vs resumed, one client flow
#     and one agent worker, with the agent's CPU per handshake.
# Needs openssl (scripts/test.sh installs it); the default build has the OpenSSL backend.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
SECS=${2:-5}
LR=./target/release/linerate
cargo build --release -q
out=$(mktemp -d)
SRV=
trap '[ -n "$SRV" ] && kill -- -"$SRV" 2>/dev/null; rm -rf "$out"' EXIT
py() { python3 -c "$@"; }

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, kernel $(uname -r), $(openssl version)"
echo "rounds=$ROUNDS seconds=$SECS"

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=bench \
  -keyout "$out/k.pem" -out "$out/c.pem" -days 1 2>/dev/null
BYTES=$((4 * 1024 * 1024 * 1024))  # 4 GiB through the openssl tools

for r in $(seq 1 "$ROUNDS"); do
  $LR run stream --tls --cipher aes256-gcm -m 16K -d "$SECS" --warmup 1 -q --json "$out/tls.json" >/dev/null
  py "import json;r=json.load(open('$out/tls.json'));s=r['summary'];b=r['baseline'];print('round $r stream tls %.2f Gbit/s clear %.2f Gbit/s ratio %.2f  client %.3f vs %.3f us/KB'%(s['throughput_bps']/1e9,b['throughput_bps']/1e9,s['throughput_bps']/b['throughput_bps'],s['cpu']['client']['us_per_kb'],b['cpu']['client']['us_per_kb']))"
  # openssl tools: the same suite; the time until s_server has passed
  # BYTES to its stdout (s_client keeps the connection open after EOF).
  rm -f "$out/end"
  setsid bash -c "sleep 600 | openssl s_server -accept 127.0.0.1:5443 -cert $out/c.pem -key $out/k.pem -tls1_3 \
    -ciphersuites TLS_AES_256_GCM_SHA384 -quiet -naccept 1 2>/dev/null | { head -c $BYTES >/dev/null; date +%s.%N > $out/end; }" &
  SRV=$!
  sleep 0.5
  t0=$(date +%s.%N)
  setsid bash -c "head -c $BYTES /dev/zero | openssl s_client -connect 127.0.0.1:5443 -tls1_3 \
    -ciphersuites TLS_AES_256_GCM_SHA384 -quiet >/dev/null 2>&1" &
  CLI=$!
  for _ in $(seq 1 1200); do [ -s "$out/end" ] && break; sleep 0.1; done
  kill -- -"$CLI" 2>/dev/null || true
  kill -- -"$SRV" 2>/dev/null || true
  wait "$CLI" "$SRV" 2>/dev/null || true
  SRV=
  if [ -s "$out/end" ]; then
    py "print('round $r stream openssl s_client->s_server %.2f Gbit/s'%($BYTES*8/($(cat "$out/end")-$t0)/1e9))"
  else
    echo "round $r stream openssl s_client->s_server: did not finish in 120 s"
  fi
done

for r in $(seq 1 "$ROUNDS"); do
  $LR crypto --each 500ms --json "$out/c.json" >/dev/null
  ours=$(py "import json;r=json.load(open('$out/c.json'));print([s['bytes_per_s'] for s in r['speeds'] if s['cipher']=='aes256-gcm' and s['record_bytes']==16384 and s['library'].startswith('aws-lc')][0])")
  theirs=$(openssl speed -evp aes-256-gcm -seconds 2 -bytes 16384 2>/dev/null | awk '/^AES-256-GCM/ {print $2}')
  py "t='$theirs'.rstrip('k');print('round $r crypto aes-256-gcm 16K: linerate (aws-lc) %.2f GB/s, openssl speed %.2f GB/s, ratio %.2f'%($ours/1e9,float(t)*1e3/1e9,$ours/(float(t)*1e3)))"
done

for r in $(seq 1 "$ROUNDS"); do
  for cert in ecdsa-p256 rsa2048; do
    for resume in off on; do
      $LR run tls-handshake -F 1 -T 1 --agent-workers 1 --cert $cert --resume $resume -d "$SECS" --warmup 1 \
        --no-baseline -q --json "$out/h.json" >/dev/null
      py "import json;r=json.load(open('$out/h.json'));s=r['summary'];c=r['iterations'][0]['counters']['client'];print('round $r handshakes %-10s resume %-3s %6.0f /s  agent %6.1f us/handshake  client %6.1f us  resumed %d/%d'%('$cert','$resume',s['tls_handshakes_per_s'],s['cpu']['agent']['us_per_tx'],s['cpu']['client']['us_per_tx'],c['tls_resumed'],c['tls_handshakes']))"
    done
  done
done
