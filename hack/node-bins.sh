#!/usr/bin/env bash
# Build the node binaries the real-node tests run (kubelet, kube-scheduler,
# kube-controller-manager, kube-proxy from the same module and version as kube-apiserver in
# hack/envtest-bins.sh, and crictl) into bin/k8s/<version>-node/, rebuilt only when missing.
# Prints that folder.
#
# Cold: about 9 minutes on 2 idle cores with an empty Go build cache (kubelet alone about 3
# minutes on a warm kube-apiserver cache). The build runs under `nice` so a shared machine stays
# usable; GO_BUILD_P sets `go build -p` (default 2). Concurrent callers take a lock, so one builds
# and the others wait and reuse its result.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
K8S_VERSION=v1.37.2
CRICTL_VERSION=v1.37.0
out="$root/bin/k8s/${K8S_VERSION}-node-crictl${CRICTL_VERSION}"
bins=(kubelet kube-scheduler kube-controller-manager kube-proxy crictl)

complete() {
  local b
  for b in "${bins[@]}"; do [ -x "$out/$b" ] || return 1; done
}

if ! complete; then
  mkdir -p "$root/bin/k8s"
  if command -v flock >/dev/null 2>&1; then
    exec 9>"$root/bin/k8s/.node-build.lock"
    if ! flock -n 9; then
      echo "hack/node-bins.sh: another build of $out is running; waiting for it" >&2
      flock 9
    fi
  fi
  if ! complete; then
    rm -rf "$out.tmp"
    mkdir -p "$out.tmp"
    p=${GO_BUILD_P:-2}
    ver="-X k8s.io/component-base/version.gitVersion=${K8S_VERSION} -X k8s.io/client-go/pkg/version.gitVersion=${K8S_VERSION} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37"
    echo "hack/node-bins.sh: building kubelet, kube-scheduler, kube-controller-manager, kube-proxy, crictl into $out (first time ~9 min)" >&2
    (
      cd "$root/hack/k8sbin"
      nice -n 10 go build -p "$p" -mod=mod -trimpath -ldflags "-s -w ${ver}" -o "$out.tmp/" \
        k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-scheduler \
        k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-proxy >&2
    )
    # crictl is its own module: `go install mod@version` builds it without touching hack/k8sbin.
    GOBIN="$out.tmp" nice -n 10 go install -p "$p" -trimpath \
      -ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=${CRICTL_VERSION}" \
      "sigs.k8s.io/cri-tools/cmd/crictl@${CRICTL_VERSION}" >&2
    rm -rf "$out"
    mv "$out.tmp" "$out"
  fi
fi
echo "$out"
