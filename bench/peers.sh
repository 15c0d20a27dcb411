#!/usr/bin/env bash
# Builds the peers Debian does not package, netperf (with --enable-demo and
# --enable-burst: TCP_RR -b, interim results), neper, memtier_benchmark
# (without TLS), the newest iperf3 (3.16+ runs a thread per stream, 3.21
# adds --gsro; Debian 12 ships 3.12) and mutilate (memcached load with
# --search N:X, without zeromq: no agent mode), from their public sources
# into a scratch folder, and prints where the binaries are.
#
# Usage: bench/peers.sh [DIR]     (default /tmp/linerate-peers)
# Sources: $NETPERF_SRC, $NEPER_SRC, $MEMTIER_SRC, $IPERF_SRC and
# $MUTILATE_SRC (a git repository: a URL or a local clone/mirror); by default a local mirror under /work/.mirror when there
# is one, else the projects' GitHub repositories.
# Other benchmarks find the binaries with: source <(bench/peers.sh --env)
set -euo pipefail
cd "$(dirname "$0")/.."
env_only=""
if [ "${1:-}" = "--env" ]; then env_only=1; shift; fi
DIR=${1:-/tmp/linerate-peers}
mkdir -p "$DIR"

pick() { # the first existing local mirror, else the URL
  local mirror=$1 url=$2
  if [ -d "$mirror" ]; then echo "$mirror"; else echo "$url"; fi
}
NETPERF_SRC=${NETPERF_SRC:-$(pick /work/.mirror/HewlettPackard+netperf/repo https://github.com/HewlettPackard/netperf)}
NEPER_SRC=${NEPER_SRC:-$(pick /work/.mirror/google+neper/repo https://github.com/google/neper)}
MEMTIER_SRC=${MEMTIER_SRC:-$(pick /work/.mirror/RedisLabs+memtier_benchmark/repo https://github.com/RedisLabs/memtier_benchmark)}
IPERF_SRC=${IPERF_SRC:-$(pick /work/.mirror/esnet+iperf/repo https://github.com/esnet/iperf)}
MUTILATE_SRC=${MUTILATE_SRC:-$(pick /work/.mirror/leverich+mutilate/repo https://github.com/leverich/mutilate)}

need=()
for pkg_cmd in autoconf:autoconf automake:automake texinfo:makeinfo make:make gcc:gcc g++:g++ \
               pkg-config:pkg-config libtool:libtoolize scons:scons gengetopt:gengetopt; do
  command -v "${pkg_cmd##*:}" >/dev/null 2>&1 || need+=("${pkg_cmd%%:*}")
done
# memtier_benchmark's and mutilate's libraries.
[ -f /usr/include/event2/event.h ] || need+=(libevent-dev)
[ -f /usr/include/zlib.h ] || need+=(zlib1g-dev)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "peers.sh: needs ${need[*]}" >&2
    exit 1
  fi
fi

if [ ! -x "$DIR/netperf/src/netperf" ]; then
  rm -rf "$DIR/netperf"
  git clone -q "$NETPERF_SRC" "$DIR/netperf"
  (
    cd "$DIR/netperf"
    ./autogen.sh >/dev/null 2>&1
    # -fcommon: netperf predates gcc 10's -fno-common default.
    ./configure --enable-demo --enable-burst CFLAGS="-O2 -fcommon" >/dev/null
    make -j"$(nproc)" >/dev/null 2>&1
  )
fi
if [ ! -x "$DIR/neper/tcp_rr" ]; then
  rm -rf "$DIR/neper"
  git clone -q "$NEPER_SRC" "$DIR/neper"
  (cd "$DIR/neper" && make -j"$(nproc)" >/dev/null 2>&1)
fi

if [ ! -x "$DIR/memtier/memtier_benchmark" ]; then
  rm -rf "$DIR/memtier"
  git clone -q "$MEMTIER_SRC" "$DIR/memtier"
  (
    cd "$DIR/memtier"
    # autoconf looks for its helper scripts in ., .. and ../.. (memtier names
    # no folder of its own): an install.sh two folders up (/tmp/install.sh)
    # took libtool's files there and configure failed. Keep them here.
    cp "$(ls -d /usr/share/automake-*/ | tail -1)install-sh" .
    autoreconf -ivf >/dev/null 2>&1
    ./configure --disable-tls >/dev/null
    make -j"$(nproc)" >/dev/null 2>&1
  )
fi

if [ ! -x "$DIR/iperf/bin/iperf3" ]; then
  rm -rf "$DIR/iperf" "$DIR/iperf-src"
  git clone -q "$IPERF_SRC" "$DIR/iperf-src"
  (
    cd "$DIR/iperf-src"
    # No OpenSSL: the authentication option is not what is measured.
    ./configure --prefix="$DIR/iperf" --without-openssl >/dev/null
    make -j"$(nproc)" >/dev/null 2>&1
    make install >/dev/null 2>&1
  )
fi

if [ ! -x "$DIR/mutilate/mutilate" ]; then
  rm -rf "$DIR/mutilate"
  git clone -q "$MUTILATE_SRC" "$DIR/mutilate"
  (
    cd "$DIR/mutilate"
    # Its SConstruct is Python 2 (print statements) and Debian's scons runs
    # on Python 3: rewrite the prints; its `&>` is bash and scons runs sh;
    # no zeromq check, so it never builds agent mode (needs cppzmq).
    sed -i -E -e 's/^( *)print (".*"),$/\1print(\2, end=" ")/' \
      -e 's/^( *)print (".*")$/\1print(\2)/' -e 's/: print (".*")$/: print(\1)/' \
      -e 's|&> /dev/null|>/dev/null 2>\&1|' -e '/CheckLibWithHeader\("zmq"/d' SConstruct
    scons -j"$(nproc)" mutilate >/dev/null 2>&1
  )
fi

if [ -n "$env_only" ]; then
  echo "MEMTIER=$DIR/memtier/memtier_benchmark"
  echo "NETPERF=$DIR/netperf/src/netperf"
  echo "NETSERVER=$DIR/netperf/src/netserver"
  echo "NEPER=$DIR/neper"
  # The newest iperf3: run it as \$IPERF3_NEW (its library sits beside it).
  echo "IPERF3_NEW='env LD_LIBRARY_PATH=$DIR/iperf/lib $DIR/iperf/bin/iperf3'"
  # mutilate: give -i a parameter (exponential:1, fixed:1; --qps rescales it):
  # a bare distribution name crashes it in strtok_r on open-loop runs.
  echo "MUTILATE=$DIR/mutilate/mutilate"
else
  echo "netperf   $DIR/netperf/src/netperf ($(cd "$DIR/netperf" && git log -1 --format=%h))"
  echo "netserver $DIR/netperf/src/netserver"
  echo "neper     $DIR/neper/{tcp_stream,tcp_rr,tcp_crr} ($(cd "$DIR/neper" && git log -1 --format=%h))"
  echo "memtier   $DIR/memtier/memtier_benchmark ($(cd "$DIR/memtier" && git log -1 --format=%h))"
  echo "iperf3    $DIR/iperf/bin/iperf3 ($(cd "$DIR/iperf-src" && git log -1 --format=%h); LD_LIBRARY_PATH=$DIR/iperf/lib)"
  echo "mutilate  $DIR/mutilate/mutilate ($(cd "$DIR/mutilate" && git log -1 --format=%h))"
fi
