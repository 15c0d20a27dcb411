#!/usr/bin/env bash
# Builds what the test Kubernetes needs here and caches it, so a second
# run is quick: etcd and the Kubernetes control plane and kubelet from their
# public Go modules (through the Go module proxy: the k8s.io/kubernetes
# module, its staging modules pinned to their published k8s.io/* versions),
# and the pause image from the pause.c that module ships. containerd, runc
# and the CNI plugins come from Debian's packages (tests/k8s/cluster.sh
# installs them).
#
# Usage: tests/k8s/build.sh            (root not needed; about 30 min of
#                                       2 cores the first time, seconds after)
#   K8S_CACHE=DIR   where the binaries and Go caches live
#                   [default: /var/cache/linerate-k8s]
#   K8S_VERSION     the Kubernetes release [default: 1.34.4: the newest that
#                   still runs on a cgroup v1 host without a flag, and
#                   takes containerd 1.6 from Debian 12]
set -euo pipefail
K8S_VERSION=${K8S_VERSION:-1.34.4}
CACHE=${K8S_CACHE:-/var/cache/linerate-k8s}
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
BIN=$CACHE/bin
mkdir -p "$BIN" "$CACHE/wrap"
export GOMODCACHE=$CACHE/gomod GOCACHE=$CACHE/gocache GOFLAGS=-mod=mod CGO_ENABLED=0 GOTOOLCHAIN=local
minor=${K8S_VERSION#1.}; minor=${minor%%.*}
staging="api apiextensions-apiserver apimachinery apiserver cli-runtime client-go
  cloud-provider cluster-bootstrap code-generator component-base component-helpers
  controller-manager cri-api cri-client csi-translation-lib dynamic-resource-allocation
  endpointslice externaljwt kms kube-aggregator kube-controller-manager kube-proxy
  kube-scheduler kubectl kubelet metrics mount-utils pod-security-admission
  sample-apiserver sample-cli-plugin sample-controller"

# The wrapper module: k8s.io/kubernetes's own go.mod points its staging
# modules at ./staging, which a module download does not carry.
{
  echo "module linerate.test/k8sbuild"
  echo
  echo "go 1.24.0"
  echo
  echo "require k8s.io/kubernetes v$K8S_VERSION"
  echo
  echo "replace ("
  for m in $staging; do echo "	k8s.io/$m => k8s.io/$m v0.$minor.${K8S_VERSION##*.}"; done
  echo ")"
} > "$CACHE/wrap/go.mod.new"
# go build adds the indirect requirements to go.mod: compare with what was
# written last time, not with go.mod.
if ! cmp -s "$CACHE/wrap/go.mod.new" "$CACHE/wrap/go.mod.gen"; then
  cp "$CACHE/wrap/go.mod.new" "$CACHE/wrap/go.mod"
  mv "$CACHE/wrap/go.mod.new" "$CACHE/wrap/go.mod.gen"
  rm -f "$CACHE/wrap/go.sum" "$BIN"/*.version
else
  rm "$CACHE/wrap/go.mod.new"
fi
cd "$CACHE/wrap"

ver="-X k8s.io/component-base/version.gitVersion=v$K8S_VERSION
  -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor
  -X k8s.io/component-base/version.gitTreeState=clean"
build() { # NAME PACKAGE
  if [ -x "$BIN/$1" ] && [ "$(cat "$BIN/$1.version" 2>/dev/null)" = "$K8S_VERSION" ]; then
    return
  fi
  echo "building $1 ($2)" >&2
  t0=$(date +%s)
  nice "$GO" build -trimpath -ldflags "-s -w $ver" -o "$BIN/$1.tmp" "$2"
  mv "$BIN/$1.tmp" "$BIN/$1"
  echo "$K8S_VERSION" > "$BIN/$1.version"
  echo "built $1 in $(( $(date +%s) - t0 )) s" >&2
}
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
build kubelet k8s.io/kubernetes/cmd/kubelet
build kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler
build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager
build kube-proxy k8s.io/kubernetes/cmd/kube-proxy
build kubectl k8s.io/kubernetes/cmd/kubectl
# etcd: the server module is a main package; the version k8s.io/kubernetes
# requires, so it is tested with it.
build etcd go.etcd.io/etcd/server/v3

# The pause container: pause.c from the same module, linked statically.
if [ ! -x "$BIN/pause" ] || [ "$(cat "$BIN/pause.version" 2>/dev/null)" != "$K8S_VERSION" ]; then
  src=$("$GO" list -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause/linux/pause.c
  cc -Os -static -DVERSION="\"linerate-$K8S_VERSION\"" -o "$BIN/pause" "$src"
  echo "$K8S_VERSION" > "$BIN/pause.version"
fi
echo "$BIN"
