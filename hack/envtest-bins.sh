#!/usr/bin/env bash
# Build the real control-plane binaries the tests run (etcd, kube-apiserver, kubectl, helm)
# from Go modules into bin/k8s/<version>/, keyed by version and rebuilt only when missing.
# The build machines have no Docker and no download site, so setup-envtest cannot fetch them.
# Prints the folder to use as KUBEBUILDER_ASSETS.
#
# Cold: about 8 minutes on 2 cores (the Go build cache makes a rebuild take seconds).
# Concurrent callers (two envtest test binaries, `make test` beside a plain `go test`) take a
# lock, so one builds and the others wait and reuse its result instead of racing on the folder.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
K8S_VERSION=v1.37.2
ETCD_VERSION=v3.7.3
HELM_VERSION=v3.22.0
out="$root/bin/k8s/${K8S_VERSION}-etcd${ETCD_VERSION}-helm${HELM_VERSION}"

complete() {
  local b
  for b in etcd kube-apiserver kubectl helm; do [ -x "$out/$b" ] || return 1; done
}

if ! complete; then
  mkdir -p "$root/bin/k8s"
  if command -v flock >/dev/null 2>&1; then
    exec 9>"$root/bin/k8s/.build.lock"
    if ! flock -n 9; then
      echo "hack/envtest-bins.sh: another build of $out is running; waiting for it" >&2
      flock 9
    fi
  fi
  # Someone else may have finished while we waited for the lock.
  if ! complete; then
    rm -rf "$out.tmp"
    mkdir -p "$out.tmp"
    cd "$root/hack/k8sbin"
    ver="-X k8s.io/component-base/version.gitVersion=${K8S_VERSION} -X k8s.io/client-go/pkg/version.gitVersion=${K8S_VERSION} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37"
    echo "hack/envtest-bins.sh: building etcd, kube-apiserver, kubectl, helm into $out (first time ~8 min)" >&2
    # -p 2: the machine has 2 cores; kube-apiserver's link peaks near 3 GB.
    go build -p 2 -mod=mod -trimpath -ldflags "-s -w ${ver} -X helm.sh/helm/v3/internal/version.version=${HELM_VERSION}" \
      -o "$out.tmp/" ./etcd k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl helm.sh/helm/v3/cmd/helm >&2
    rm -rf "$out"
    mv "$out.tmp" "$out"
  fi
fi
echo "$out"
