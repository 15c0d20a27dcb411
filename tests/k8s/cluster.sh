#!/usr/bin/env bash
# A one-node Kubernetes on this machine, for linerate's Kubernetes tests:
# no image pull and no registry. containerd, runc and the CNI plugins come
# from Debian's packages; etcd, the control plane, the kubelet, kube-proxy
# and the pause image from tests/k8s/build.sh (built once, cached).
#
# The node lives in a network namespace of its own (lr-k8s, 198.18.250.1),
# joined to this host by a veth (198.18.250.2): pods get 198.19.100.0/24 on
# a bridge in that namespace, Services 198.19.101.0/24, kube-proxy's rules
# stay in it. Every daemon runs with only its network namespace changed
# (nsenter --net), so kubelet's volume mounts and containerd's see each
# other. Everything else is under $K8S_STATE.
#
# Usage (root):
#   tests/k8s/cluster.sh up       build if needed, start, wait until the
#                                 node is Ready; prints the kubeconfig path
#   tests/k8s/cluster.sh down     stop everything it started, remove the
#                                 namespaces, links and files
#   tests/k8s/cluster.sh status   exit 0 when the cluster answers
#   tests/k8s/cluster.sh kubectl ARGS...   kubectl against it
#   tests/k8s/cluster.sh load IMAGE.tar    an image for the node (such as
#                                 scripts/agent-image.sh writes): no registry
#   K8S_STATE=DIR  [default: /run/linerate-k8s]; K8S_CACHE as for build.sh
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
STATE=${K8S_STATE:-/run/linerate-k8s}
CACHE=${K8S_CACHE:-/var/cache/linerate-k8s}
BIN=$CACHE/bin
NS=lr-k8s
NODE=lr-k8s-node
NODE_IP=198.18.250.1
HOST_IP=198.18.250.2
POD_CIDR=198.19.100.0/24
SVC_CIDR=198.19.101.0/24
SVC_IP=198.19.101.1
API=https://$NODE_IP:6443
PAUSE_IMAGE=registry.k8s.io/pause:3.10.1

die() { echo "cluster.sh: $*" >&2; exit 1; }
in_ns() { nsenter --net=/run/netns/$NS "$@"; }
kc() { "$BIN/kubectl" --kubeconfig "$STATE/admin.kubeconfig" "$@"; }

# Starts NAME (a command line) in the node's namespace, in the background,
# its output in $STATE/log/NAME.log and its PID in $STATE/pid/NAME.
start() {
  local name=$1; shift
  setsid nsenter --net=/run/netns/$NS "$@" >"$STATE/log/$name.log" 2>&1 </dev/null &
  echo $! >"$STATE/pid/$name"
}

# Waits up to $2 seconds for the command $3... to succeed; on timeout shows
# the last lines of log $1 and fails.
wait_for() {
  local log=$1 secs=$2; shift 2
  local end=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= end)); then
      tail -n 20 "$STATE/log/$log.log" >&2 || true
      die "$log: not ready within $secs s (log: $STATE/log/$log.log)"
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
    "IP:$NODE_IP,IP:$SVC_IP,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  cert apiserver-kubelet kube-apiserver-kubelet-client system:masters
  cert admin admin system:masters
  cert kubelet "system:node:$NODE" system:nodes "DNS:$NODE,IP:$NODE_IP"
  cert controller-manager system:kube-controller-manager
  cert scheduler system:kube-scheduler
  cert proxy system:kube-proxy
  openssl genrsa -out "$STATE/pki/sa.key" 2048 2>/dev/null
  openssl rsa -in "$STATE/pki/sa.key" -pubout -out "$STATE/pki/sa.pub" 2>/dev/null
  kubeconfig admin admin
  kubeconfig kubelet "system:node:$NODE"
  kubeconfig controller-manager system:kube-controller-manager
  kubeconfig scheduler system:kube-scheduler
  kubeconfig proxy system:kube-proxy
}

network() {
  ip netns add $NS
  ip link add lrk8s-h type veth peer name lrk8s-n
  ip link set lrk8s-n netns $NS
  ip addr add $HOST_IP/30 dev lrk8s-h
  ip link set lrk8s-h up
  ip -n $NS addr add $NODE_IP/30 dev lrk8s-n
  ip -n $NS link set lrk8s-n up
  ip -n $NS link set lo up
  # Service addresses are reached through the node; pods through its bridge.
  ip route add $POD_CIDR via $NODE_IP dev lrk8s-h
  ip route add $SVC_CIDR via $NODE_IP dev lrk8s-h
  in_ns sysctl -qw net.ipv4.ip_forward=1
  in_ns sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || true
  # The CNI bridge: pods on one subnet, the node their gateway; no
  # masquerade (nothing here leaves the machine).
  mkdir -p "$STATE/cni"
  cat >"$STATE/cni/10-linerate.conflist" <<EOF
{"cniVersion":"0.4.0","name":"linerate-k8s","plugins":[
 {"type":"bridge","bridge":"cni0","isGateway":true,"ipMasq":false,"hairpinMode":true,
  "ipam":{"type":"host-local","ranges":[[{"subnet":"$POD_CIDR","gateway":"198.19.100.1"}]],
          "routes":[{"dst":"0.0.0.0/0"}]}},
 {"type":"portmap","capabilities":{"portMappings":true}}]}
EOF
}

containerd_up() {
  mkdir -p "$STATE/containerd"
  cat >"$STATE/containerd/config.toml" <<EOF
version = 2
root = "$STATE/containerd/root"
state = "$STATE/containerd/state"
[grpc]
  address = "$STATE/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # Root here lacks CAP_SYS_RESOURCE (a VM's init keeps it): no score
  # below containerd's own, or runc fails to start any pod.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$STATE/cni"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
    SystemdCgroup = false
EOF
  start containerd containerd --config "$STATE/containerd/config.toml"
  wait_for containerd 30 ctr -a "$STATE/containerd.sock" version
  local root
  root=$(mktemp -d)
  cp "$BIN/pause" "$root/pause"
  "$HERE/../../scripts/image-tar.sh" "$PAUSE_IMAGE" "$root" /pause "$STATE/pause.tar"
  rm -rf "$root"
  ctr -a "$STATE/containerd.sock" -n k8s.io images import "$STATE/pause.tar" >/dev/null
}

control_plane() {
  start etcd "$BIN/etcd" --data-dir "$STATE/etcd" --listen-client-urls http://127.0.0.1:2379 \
    --advertise-client-urls http://127.0.0.1:2379 --listen-peer-urls http://127.0.0.1:2380 \
    --log-level warn
  wait_for etcd 30 in_ns "$BIN/etcd" --version
  start kube-apiserver "$BIN/kube-apiserver" --etcd-servers=http://127.0.0.1:2379 \
    --advertise-address=$NODE_IP --bind-address=0.0.0.0 --secure-port=6443 \
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
  start kube-controller-manager "$BIN/kube-controller-manager" \
    --kubeconfig="$STATE/controller-manager.kubeconfig" --leader-elect=false \
    --service-account-private-key-file="$STATE/pki/sa.key" --root-ca-file="$STATE/pki/ca.crt" \
    --cluster-signing-cert-file="$STATE/pki/ca.crt" --cluster-signing-key-file="$STATE/pki/ca.key" \
    --use-service-account-credentials=true --allocate-node-cidrs=false \
    --service-cluster-ip-range=$SVC_CIDR
  start kube-scheduler "$BIN/kube-scheduler" --kubeconfig="$STATE/scheduler.kubeconfig" \
    --leader-elect=false
}

node() {
  mkdir -p "$STATE/kubelet"
  cat >"$STATE/kubelet/config.yaml" <<EOF
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
containerRuntimeEndpoint: unix://$STATE/containerd.sock
failSwapOn: false
resolvConf: /etc/resolv.conf
evictionHard: {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"}
imageGCHighThresholdPercent: 100
serializeImagePulls: false
EOF
  start kubelet "$BIN/kubelet" --config="$STATE/kubelet/config.yaml" \
    --kubeconfig="$STATE/kubelet.kubeconfig" --root-dir="$STATE/kubelet/root" \
    --hostname-override=$NODE --node-ip=$NODE_IP \
    --tls-cert-file="$STATE/pki/kubelet.crt" --tls-private-key-file="$STATE/pki/kubelet.key"
  start kube-proxy "$BIN/kube-proxy" --kubeconfig="$STATE/proxy.kubeconfig" \
    --hostname-override=$NODE --cluster-cidr=$POD_CIDR --proxy-mode=iptables \
    --metrics-bind-address=127.0.0.1:10249
  wait_for kubelet 120 sh -c "'$BIN/kubectl' --kubeconfig '$STATE/admin.kubeconfig' get node $NODE -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"
  # The controller-manager makes each namespace's default ServiceAccount:
  # pods cannot be created before it.
  wait_for kube-controller-manager 60 kc -n default get serviceaccount default
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
  trap 'echo "cluster.sh: up failed; taking it down" >&2; down >/dev/null 2>&1' ERR
  network
  pki
  containerd_up
  control_plane
  node
  trap - ERR
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
  for name in kube-proxy kubelet kube-scheduler kube-controller-manager kube-apiserver etcd; do
    [ -f "$STATE/pid/$name" ] && stop_pid "$(cat "$STATE/pid/$name")"
  done
  if [ -S "$STATE/containerd.sock" ]; then
    local c
    for c in $(ctr -a "$STATE/containerd.sock" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr -a "$STATE/containerd.sock" -n k8s.io tasks kill -s KILL "$c" >/dev/null 2>&1 || true
    done
  fi
  # The shims containerd started for this cluster's pods, by their address.
  local pid
  for pid in $(pgrep -f "containerd-shim.*-address $STATE/containerd.sock" || true); do
    stop_pid "$pid"
  done
  [ -f "$STATE/pid/containerd" ] && stop_pid "$(cat "$STATE/pid/containerd")"
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
  ip route del $POD_CIDR 2>/dev/null || true
  ip route del $SVC_CIDR 2>/dev/null || true
  ip link del lrk8s-h 2>/dev/null || true
  ip netns del $NS 2>/dev/null || true
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
    ctr -a "$STATE/containerd.sock" -n k8s.io images import "$2" >/dev/null ;;
  *) echo "usage: $0 up|down|status|kubectl ARGS...|load IMAGE.tar" >&2; exit 2 ;;
esac
