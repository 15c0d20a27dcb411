#!/usr/bin/env bash
# Regenerates the real results folders under tests/fixtures/ that
# tests/fixtures.rs draws every report from: udp, memcache, tls,
# tls-handshake, conn, mix, search, cipher, rpm, http, hosts,
# environments/{loopback,lab},
# rrul and exec. Each is a short study
# (bench/fixtures/NAME.toml) run on this machine's loopback; only its inputs
# are kept (study.toml, manifest.json, points/*.json), the reports are drawn
# again by the tests.
#
#   bench/fixtures.sh                 # all of them (about a minute)
#   ONLY="udp tls" bench/fixtures.sh  # some
#
# Needs: a release build (LR=path to use another binary), memcached on PATH
# (the memcache study's agent starts it), root for `environments`, `rrul`
# and `exec` (labs: namespaces of this host joined through an emulated link;
# each study brings its lab up and takes it down; exec also needs OpenSSH).
# Traffic stays on 127.0.0.0/8 and inside the lab's namespaces (198.18.0.0/15).
# The quick and wan-lite fixtures are made otherwise (tests/fixtures/README.md).
# After regenerating, the numbers differ: run `cargo test --test fixtures`,
# which reads each fixture's own figures, and update tests/fixtures/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."

LR=${LR:-target/release/linerate}
ONLY=${ONLY:-udp memcache tls tls-handshake conn mix search cipher rpm http hosts environments rrul exec}
RUN=target/fixtures-run
FIX=tests/fixtures
# Every command is bounded in time.
LIMIT=${LIMIT:-600}

[ -x "$LR" ] || { echo "no $LR: cargo build --release first (or LR=path)" >&2; exit 1; }
mkdir -p "$RUN"

# keep SRC NAME: the inputs of results folder SRC become tests/fixtures/NAME.
keep() {
    local src=$1 dst=$FIX/$2
    rm -rf "$dst"
    mkdir -p "$dst/points"
    cp "$src/study.toml" "$src/manifest.json" "$dst/"
    cp "$src"/points/*.json "$dst/points/"
    echo "$dst: $(du -sb "$dst" | cut -f1) bytes"
}

# study NAME TAG [ARGS...]: runs bench/fixtures/NAME.toml into a fresh folder
# under $RUN/TAG (paths relative to the repository, so none is absolute in
# the results) and prints that results folder.
study() {
    local name=$1 out=$RUN/$2
    shift 2
    rm -rf "$out"
    timeout "$LIMIT" "$LR" study run "bench/fixtures/$name.toml" --out "$out" --no-report -q "$@" >&2
    ls -d "$out"/*/ | head -1 | sed 's:/$::'
}

PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

# agent NAME IP: a `linerate serve` on IP (a free port, the token in
# $RUN/token); sets PORT to its port.
agent() {
    local log=$RUN/agent-$1.out
    : >"$log"
    timeout "$LIMIT" "$LR" serve --listen "$2:0" --token-file "$RUN/token" --quiet >"$log" 2>"$RUN/agent-$1.err" &
    PIDS+=($!)
    for _ in $(seq 100); do
        if grep -q "listening on" "$log"; then
            PORT=$(sed -n 's/.*listening on [^ ]*:\([0-9]*\).*/\1/p' "$log" | head -1)
            return
        fi
        sleep 0.1
    done
    echo "agent $1 on $2 did not start: $(cat "$RUN/agent-$1.err")" >&2
    exit 1
}

for name in $ONLY; do
    case $name in
    udp | memcache | tls | tls-handshake | conn | mix | search | cipher | rpm | http)
        dir=$(study "$name" "$name")
        keep "$dir" "$name"
        ;;
    hosts)
        hosts=$RUN/hosts.toml
        (
            umask 077
            head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$RUN/token"
        )
        {
            echo "# sut accepts the flows; d1 and d2 open them."
            printf '[defaults]\ntoken_file = "token"\n'
            for h in sut:127.0.0.2:server d1:127.0.0.3:client d2:127.0.0.4:client; do
                IFS=: read -r n ip role <<<"$h"
                agent "$n" "$ip"
                printf '\n[[host]]\nname = "%s"\naddress = "%s"\nport = %s\nrole = "%s"\n' "$n" "$ip" "$PORT" "$role"
            done
        } >"$hosts"
        dir=$(study hosts hosts --hosts "$hosts")
        keep "$dir" hosts
        for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
        PIDS=()
        ;;
    environments)
        [ "$(id -u)" = 0 ] || { echo "environments needs root (a lab)" >&2; exit 1; }
        loopback=$(study environments env-loopback)
        # Its [lab] comes up and goes down with it.
        lab=$(study environments-lab env-lab)
        rm -rf "$FIX/environments"
        keep "$loopback" environments/loopback
        keep "$lab" environments/lab
        ;;
    rrul | exec)
        [ "$(id -u)" = 0 ] || { echo "$name needs root (a lab)" >&2; exit 1; }
        dir=$(study "$name" "$name")
        keep "$dir" "$name"
        ;;
    *)
        echo "unknown fixture $name" >&2
        exit 2
        ;;
    esac
done
