#!/usr/bin/env bash
# A Kubernetes of two nodes on this machine, for linerate's Kubernetes tests:
# no image pull and no registry. containerd, runc and the CNI plugins come
# from Debian's packages; etcd, the control plane, the kubelet, kube-proxy
# and the pause image from tests/k8s/build.sh (built once, cached).
#
# Two nodes by default (K8S_NODES), so that pods can be placed on the same
# node or another. Node i lives in a network namespace of its own
# (lr-k8s-i, 198.18.250.i) with its own containerd, kubelet and kube-proxy;
# the nodes and this host (198.18.250.254) meet on a bridge in a fabric
# namespace (lr-k8s-net), as machines on one switch. Node i's pods get
# 198.19.(119+i).0/24 on a bridge in its namespace, Services 198.19.100.0/24;
# each node routes the others' pod subnets to them, and so does this host.
# The control plane (etcd, API server, controllers) runs on node 1. Every
# daemon runs with only its network namespace changed (nsenter --net), so
# kubelet's volume mounts and containerd's see each other. Everything else
# is under $K8S_STATE.
#
# Usage (root):
#   tests/k8s/cluster.sh up       build if needed, start, wait until the
#                                 node is Ready; prints the kubeconfig path
#   tests/k8s/cluster.sh down     stop everything it started, remove the
#                                 namespaces, links and files
#   tests/k8s/cluster.sh status   exit 0 when the cluster answers
#   tests/k8s/cluster.sh kubectl ARGS...   kubectl against it
#   tests/k8s/cluster.sh load IMAGE.tar    an image for every node (such as
#                                 scripts/agent-image.sh writes): no registry
#   K8S_STATE=DIR  [default: /run/linerate-k8s]; K8S_CACHE as for build.sh
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
STATE=${K8S_STATE:-/run/linerate-k8s}
CACHE=${K8S_CACHE:-/var/cache/linerate-k8s}
BIN=$CACHE/bin
NODES=${K8S_NODES:-2}
[[ $NODES =~ ^[1-8]$ ]] || { echo "cluster.sh: K8S_NODES must be 1 to 8" >&2; exit 2; }
FABRIC=lr-k8s-net
HOST_IP=198.18.250.254
SVC_CIDR=198.19.100.0/24
SVC_IP=198.19.100.1
API=https://198.18.250.1:6443
# Node i: its name, namespace, address, pod subnet.
node_name() { echo "lr-k8s-$1"; }
node_ip() { echo "198.18.250.$1"; }
pod_cidr() { echo "198.19.$((119 + $1)).0/24"; }
PAUSE_IMAGE=registry.k8s.io/pause:3.10.1

die() { echo "cluster.sh: $*" >&2; exit 1; }
in_node() { local i=$1; shift; nsenter --net="/run/netns/$(node_name "$i")" "$@"; }
kc() { "$BIN/kubectl" --kubeconfig "$STATE/admin.kubeconfig" "$@"; }

# Starts NAME (a command line) in node I's namespace, in the background,
# its output in $STATE/log/NAME.log and its PID in $STATE/pid/NAME.
start() {
  local i=$1 name=$2; shift 2
  setsid nsenter --net="/run/netns/$(node_name "$i")" "$@" >"$STATE/log/$name.log" 2>&1 </dev/null &
  echo $! >"$STATE/pid/$name"
}

# Waits up to $2 seconds for the command $3... to succeed; fails at once
# if daemon $1 exited, else on timeout, showing the last lines of its log.
wait_for() {
  local log=$1 secs=$2; shift 2
  local end=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if [ -f "$STATE/pid/$log" ] && ! kill -0 "$(cat "$STATE/pid/$log")" 2>/dev/null; then
      tail -n 20 "$STATE/log/$log.log" >&2 || true
      die "$log exited"
    fi
    if ((SECONDS >= end)); then
      tail -n 20 "$STATE/log/$log.log" >&2 || true
      die "$log: not ready within $secs s"
    fi
    sleep 1
  done
}

deps() {
  local missing=()
  for c in containerd:containerd runc:runc conntrack:conntrack socat:socat iptables:iptables openssl:openssl; do
    command -v "${c%%:*}" >/dev/null || missing+=("${c##*:}")
  done
  [ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
  if [ ${#missing[@]} -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null \
      || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null; }
  fi
}

# A certificate signed by the cluster's CA: NAME CN [O] [SANS].
cert() {
  local name=$1 cn=$2 o=${3:-} sans=${4:-}
  local subj="/CN=$cn"
  [ -n "$o" ] && subj="/O=$o$subj"
  openssl req -new -newkey rsa:2048 -nodes -keyout "$STATE/pki/$name.key" \
    -subj "$subj" -out "$STATE/pki/$name.csr" 2>/dev/null
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=serverAuth,clientAuth"
    [ -n "$sans" ] && echo "subjectAltName=$sans"
  } >"$STATE/pki/$name.ext"
  openssl x509 -req -in "$STATE/pki/$name.csr" -CA "$STATE/pki/ca.crt" -CAkey "$STATE/pki/ca.key" \
    -CAcreateserial -days 30 -extfile "$STATE/pki/$name.ext" -out "$STATE/pki/$name.crt" 2>/dev/null
}

kubeconfig() { # NAME USER: a kubeconfig with the client cert NAME
  cat >"$STATE/$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: linerate-k8s
  cluster:
    server: $API
    certificate-authority: $STATE/pki/ca.crt
users:
- name: $2
  user:
    client-certificate: $STATE/pki/$1.crt
    client-key: $STATE/pki/$1.key
contexts:
- name: linerate-k8s
  context: {cluster: linerate-k8s, user: $2}
current-context: linerate-k8s
EOF
}

pki() {
  mkdir -p "$STATE/pki"
  openssl req -x509 -new -newkey rsa:2048 -nodes -days 30 -subj "/CN=linerate-k8s-ca" \
    -keyout "$STATE/pki/ca.key" -out "$STATE/pki/ca.crt" 2>/dev/null
  cert apiserver kube-apiserver "" \
    "IP:$(node_ip 1),IP:$SVC_IP,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  cert apiserver-kubelet kube-apiserver-kubelet-client system:masters
  cert admin admin system:masters
  local i
  for i in $(seq 1 "$NODES"); do
    cert "kubelet$i" "system:node:$(node_name "$i")" system:nodes "DNS:$(node_name "$i"),IP:$(node_ip "$i")"
    kubeconfig "kubelet$i" "system:node:$(node_name "$i")"
  done
  cert controller-manager system:kube-controller-manager
  cert scheduler system:kube-scheduler
  cert proxy system:kube-proxy
  openssl genrsa -out "$STATE/pki/sa.key" 2048 2>/dev/null
  openssl rsa -in "$STATE/pki/sa.key" -pubout -out "$STATE/pki/sa.pub" 2>/dev/null
  kubeconfig admin admin
  kubeconfig controller-manager system:kube-controller-manager
  kubeconfig scheduler system:kube-scheduler
  kubeconfig proxy system:kube-proxy
}

network() {
  # The fabric: one bridge, this host and every node on it.
  ip netns add $FABRIC
  ip -n $FABRIC link add br0 type bridge
  ip -n $FABRIC link set br0 up
  ip link add lrk8s-h type veth peer name h0 netns $FABRIC
  ip -n $FABRIC link set h0 master br0 up
  ip addr add $HOST_IP/24 dev lrk8s-h
  ip link set lrk8s-h up
  ip route add $SVC_CIDR via "$(node_ip 1)" dev lrk8s-h
  local i j ns
  for i in $(seq 1 "$NODES"); do
    ns=$(node_name "$i")
    ip netns add "$ns"
    ip -n "$ns" link add eth0 type veth peer name "n$i" netns $FABRIC
    ip -n $FABRIC link set "n$i" master br0 up
    ip -n "$ns" addr add "$(node_ip "$i")/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    in_node "$i" sysctl -qw net.ipv4.ip_forward=1
    in_node "$i" sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || true
    ip route add "$(pod_cidr "$i")" via "$(node_ip "$i")" dev lrk8s-h
    for j in $(seq 1 "$NODES"); do
      [ "$j" = "$i" ] || ip -n "$ns" route add "$(pod_cidr "$j")" via "$(node_ip "$j")" dev eth0
    done
    # The CNI bridge: the node's pods on one subnet, the node their gateway;
    # no masquerade (nothing here leaves the machine).
    mkdir -p "$STATE/node$i/cni"
    cat >"$STATE/node$i/cni/10-linerate.conflist" <<EOF
{"cniVersion":"0.4.0","name":"linerate-k8s","plugins":[
 {"type":"bridge","bridge":"cni0","isGateway":true,"ipMasq":false,"hairpinMode":true,
  "ipam":{"type":"host-local","ranges":[[{"subnet":"$(pod_cidr "$i")"}]],
          "routes":[{"dst":"0.0.0.0/0"}]}},
 {"type":"portmap","capabilities":{"portMappings":true}}]}
EOF
  done
}

containerd_up() { # node I
  local i=$1 d=$STATE/node$1
  mkdir -p "$d/containerd"
  cat >"$d/containerd/config.toml" <<EOF
version = 2
root = "$d/containerd/root"
state = "$d/containerd/state"
[grpc]
  address = "$d/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # Root here lacks CAP_SYS_RESOURCE (a VM's init keeps it): no score
  # below containerd's own, or runc fails to start any pod.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$d/cni"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
    SystemdCgroup = false
EOF
  start "$i" "containerd$i" containerd --config "$d/containerd/config.toml"
  wait_for "containerd$i" 30 ctr -a "$d/containerd.sock" version
  if [ ! -f "$STATE/pause.tar" ]; then
    local root
    root=$(mktemp -d)
    cp "$BIN/pause" "$root/pause"
    "$HERE/../../scripts/image-tar.sh" "$PAUSE_IMAGE" "$root" /pause "$STATE/pause.tar"
    rm -rf "$root"
  fi
  ctr -a "$d/containerd.sock" -n k8s.io images import "$STATE/pause.tar" >/dev/null
}

control_plane() {
  start 1 etcd "$BIN/etcd" --data-dir "$STATE/etcd" --listen-client-urls http://127.0.0.1:2379 \
    --advertise-client-urls http://127.0.0.1:2379 --listen-peer-urls http://127.0.0.1:2380 \
    --log-level warn
  wait_for etcd 30 in_node 1 "$BIN/etcd" --version
  start 1 kube-apiserver "$BIN/kube-apiserver" --etcd-servers=http://127.0.0.1:2379 \
    --advertise-address="$(node_ip 1)" --bind-address=0.0.0.0 --secure-port=6443 \
    --service-cluster-ip-range=$SVC_CIDR \
    --tls-cert-file="$STATE/pki/apiserver.crt" --tls-private-key-file="$STATE/pki/apiserver.key" \
    --client-ca-file="$STATE/pki/ca.crt" \
    --kubelet-client-certificate="$STATE/pki/apiserver-kubelet.crt" \
    --kubelet-client-key="$STATE/pki/apiserver-kubelet.key" \
    --service-account-key-file="$STATE/pki/sa.pub" \
    --service-account-signing-key-file="$STATE/pki/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --authorization-mode=Node,RBAC --allow-privileged=true \
    --kubelet-preferred-address-types=InternalIP
  wait_for kube-apiserver 90 kc get --raw /readyz
  start 1 kube-controller-manager "$BIN/kube-controller-manager" \
    --kubeconfig="$STATE/controller-manager.kubeconfig" --leader-elect=false \
    --service-account-private-key-file="$STATE/pki/sa.key" --root-ca-file="$STATE/pki/ca.crt" \
    --cluster-signing-cert-file="$STATE/pki/ca.crt" --cluster-signing-key-file="$STATE/pki/ca.key" \
    --use-service-account-credentials=true --allocate-node-cidrs=false \
    --service-cluster-ip-range=$SVC_CIDR
  start 1 kube-scheduler "$BIN/kube-scheduler" --kubeconfig="$STATE/scheduler.kubeconfig" \
    --leader-elect=false
}

node() { # node I: its kubelet and kube-proxy
  local i=$1 d=$STATE/node$1 name
  name=$(node_name "$i")
  mkdir -p "$d/kubelet"
  cat >"$d/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$STATE/pki/ca.crt"}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
containerRuntimeEndpoint: unix://$d/containerd.sock
failSwapOn: false
resolvConf: /etc/resolv.conf
evictionHard: {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"}
imageGCHighThresholdPercent: 100
serializeImagePulls: false
EOF
  start "$i" "kubelet$i" "$BIN/kubelet" --config="$d/kubelet/config.yaml" \
    --kubeconfig="$STATE/kubelet$i.kubeconfig" --root-dir="$d/kubelet/root" \
    --hostname-override="$name" --node-ip="$(node_ip "$i")" \
    --tls-cert-file="$STATE/pki/kubelet$i.crt" --tls-private-key-file="$STATE/pki/kubelet$i.key"
  start "$i" "kube-proxy$i" "$BIN/kube-proxy" --kubeconfig="$STATE/proxy.kubeconfig" \
    --hostname-override="$name" --cluster-cidr=198.19.120.0/21 --proxy-mode=iptables \
    --metrics-bind-address=127.0.0.1:10249 --conntrack-max-per-core=0
  # (nf_conntrack_max is the machine's, writable only from the first
  # network namespace: kube-proxy leaves it as it is.)
}

# Waits for every node to be Ready, then for the default ServiceAccount,
# which the controller manager makes: pods cannot be created before it.
ready() {
  local i
  for i in $(seq 1 "$NODES"); do
    wait_for "kubelet$i" 120 sh -c "'$BIN/kubectl' --kubeconfig '$STATE/admin.kubeconfig' get node $(node_name "$i") -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"
  done
  wait_for kube-controller-manager 60 kc -n default get serviceaccount default
  # Services work once each node's kube-proxy has written its rules.
  for i in $(seq 1 "$NODES"); do
    wait_for "kube-proxy$i" 60 ip netns exec "$(node_name "$i")" iptables -t nat -S KUBE-SERVICES
  done
}

up() {
  [ "$(id -u)" = 0 ] || die "needs root"
  if status 2>/dev/null; then echo "$STATE/admin.kubeconfig"; return; fi
  [ -e "$STATE" ] && down >/dev/null 2>&1
  deps
  "$HERE/build.sh" >/dev/null
  mkdir -p "$STATE/log" "$STATE/pid"
  # kubelet needs mounts to propagate (k3s and kind do the same); put back by down.
  findmnt -no PROPAGATION / >"$STATE/root-propagation"
  # Pod namespaces that CNI names cni-*: those not here now are this cluster's.
  ls /run/netns 2>/dev/null >"$STATE/netns-before" || true
  mount --make-rshared /
  # Any failure from here (a command, or die) takes down what was started.
  # The daemons' logs are kept for the diagnosis, outside the state.
  trap 'rc=$?; if [ $rc -ne 0 ]; then
      logs=${TMPDIR:-/tmp}/linerate-k8s-logs; rm -rf "$logs"; cp -r "$STATE/log" "$logs" 2>/dev/null
      echo "cluster.sh: up failed; taking it down (the daemons'"'"' logs: $logs)" >&2
      down >/dev/null 2>&1; fi' EXIT
  network
  pki
  local i
  for i in $(seq 1 "$NODES"); do containerd_up "$i"; done
  control_plane
  for i in $(seq 1 "$NODES"); do node "$i"; done
  ready
  trap - EXIT
  echo "$STATE/admin.kubeconfig"
}

status() {
  [ -f "$STATE/admin.kubeconfig" ] && kc get --raw /readyz >/dev/null 2>&1
}

# Stops PID and what it leaves behind, TERM then KILL after 10 s.
stop_pid() {
  local pid=$1 i
  kill -TERM "$pid" 2>/dev/null || return 0
  for i in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
}

down() {
  [ "$(id -u)" = 0 ] || die "needs root"
  # Pods first, while the kubelet and containerd can still tear them down.
  if status 2>/dev/null; then
    kc delete namespace -l linerate.io/test --wait=false >/dev/null 2>&1 || true
  fi
  local f pid sock c
  for f in "$STATE"/pid/kube-proxy* "$STATE"/pid/kubelet* "$STATE"/pid/kube-scheduler \
      "$STATE"/pid/kube-controller-manager "$STATE"/pid/kube-apiserver "$STATE"/pid/etcd; do
    [ -f "$f" ] && stop_pid "$(cat "$f")"
  done
  for sock in "$STATE"/node*/containerd.sock; do
    [ -S "$sock" ] || continue
    for c in $(ctr -a "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr -a "$sock" -n k8s.io tasks kill -s KILL "$c" >/dev/null 2>&1 || true
    done
    # The shims this containerd started for the node's pods, by its address.
    for pid in $(pgrep -f "containerd-shim.*-address $sock" || true); do
      stop_pid "$pid"
    done
  done
  for f in "$STATE"/pid/containerd*; do
    [ -f "$f" ] && stop_pid "$(cat "$f")"
  done
  # Pod network namespaces left by a pod that was not torn down: those
  # CNI named cni-* since up.
  local n
  for n in $(ls /run/netns 2>/dev/null | grep '^cni-' || true); do
    grep -qx "$n" "$STATE/netns-before" 2>/dev/null || ip netns del "$n" 2>/dev/null || true
  done
  # Pod cgroups containerd made (cgroupfs, under k8s.io), deepest first.
  find /sys/fs/cgroup/*/k8s.io -depth -type d -exec rmdir {} \; 2>/dev/null || true
  if [ -d "$STATE" ]; then
    { grep -o "$STATE[^ ]*" /proc/mounts || true; } | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
  fi
  for n in 1 2 3 4 5 6 7 8; do
    ip route del "$(pod_cidr "$n")" via "$(node_ip "$n")" 2>/dev/null || true
    ip netns del "$(node_name "$n")" 2>/dev/null || true
  done
  ip route del $SVC_CIDR 2>/dev/null || true
  ip link del lrk8s-h 2>/dev/null || true
  ip netns del $FABRIC 2>/dev/null || true
  if [ -f "$STATE/root-propagation" ]; then
    case $(cat "$STATE/root-propagation") in
      private) mount --make-rprivate / ;;
      *) ;;
    esac
  fi
  rm -rf "$STATE"
  echo "down"
}

case ${1:-} in
  up) up ;;
  down) down ;;
  status) status ;;
  kubectl) shift; kc "$@" ;;
  load)
    [ $# -eq 2 ] || die "usage: $0 load IMAGE.tar"
    for sock in "$STATE"/node*/containerd.sock; do
      ctr -a "$sock" -n k8s.io images import "$2" >/dev/null
    done ;;
  *) echo "usage: $0 up|down|status|kubectl ARGS...|load IMAGE.tar" >&2; exit 2 ;;
esac
