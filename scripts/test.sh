#!/usr/bin/env bash
# The README's test command: installs what the tests and benchmarks need
# when missing, then runs formatting, lints and every test.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
# chromium renders the HTML report in tests/report_browser.rs; openssl is
# the peer in bench/tls.sh (the OpenSSL backend is built from source). The lab (tests/lab.rs) needs iptables (its
# iptables-legacy NFQUEUE target), ethtool, and OpenSSH server and client
# for the scp workload. memcached is the server of the memcache workload
# (tests/memcache.rs). curl reads the RPM server over HTTP/2 (tests/rpm.rs).
# nginx is the foreign HTTP server of tests/http.rs; h2load and wrk are the
# peers of bench/http.sh.
for pkg_cmd in iproute2:ip iperf3:iperf3 sockperf:sockperf qperf:qperf chromium:chromium \
               memcached:memcached \
               wireguard-go:wireguard-go wireguard-tools:wg \
               openssl:openssl perl:perl make:make iptables:iptables-legacy \
               ethtool:ethtool openssh-server:/usr/sbin/sshd openssh-client:scp curl:curl \
               nginx-light:/usr/sbin/nginx nghttp2-client:h2load wrk:wrk; do
  pkg=${pkg_cmd%%:*}; cmd=${pkg_cmd##*:}
  command -v "$cmd" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing: ${need[*]}"
    apt-get update -qq >/dev/null
    # Installing openssh-server must not start the host's sshd: the lab
    # starts its own, inside a namespace. policy-rc.d exit 101 = "do not".
    made_policy=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
      chmod +x /usr/sbin/policy-rc.d
      made_policy=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
    [ -n "$made_policy" ] && rm -f /usr/sbin/policy-rc.d
  else
    echo "note: missing ${need[*]} (bench/ uses the peers; the browser test needs chromium)" >&2
  fi
fi

# promtool, Prometheus's own checker of metrics text (tests/metrics.rs):
# taken from Debian's prometheus package without installing it (installing
# would start a Prometheus server on the host).
if [ ! -x target/tools/promtool ] && ! command -v promtool >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  tools=$(mktemp -d)
  if (cd "$tools" && { apt-get download -qq prometheus >/dev/null 2>&1 ||
        { apt-get update -qq >/dev/null && apt-get download -qq prometheus >/dev/null 2>&1; }; } &&
      dpkg-deb -x prometheus_*.deb x); then
    mkdir -p target/tools && cp "$tools/x/usr/bin/promtool" target/tools/promtool
  else
    echo "note: promtool could not be fetched (tests/metrics.rs needs it)" >&2
  fi
  rm -rf "$tools"
fi

cargo fmt --check
cargo clippy --all-targets --all-features -- -D warnings
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# LINERATE_K8S=1: a two-node Kubernetes (tests/k8s/cluster.sh: its first
# build takes minutes) is up for the suite, so tests/k8s.rs runs; taken
# down at the end, also on failure.
if [ "${LINERATE_K8S:-}" = 1 ]; then
  tests/k8s/cluster.sh up >/dev/null
  trap 'rm -f "$log"; tests/k8s/cluster.sh down >/dev/null 2>&1 || true' EXIT
fi
cargo test --release --all-features 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
# One plain closing line with the totals over every test binary.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed/) p += $(i-1); if ($i ~ /^failed/) f += $(i-1) } }
     END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
