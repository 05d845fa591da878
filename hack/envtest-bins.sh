#!/usr/bin/env bash
# Build the real control-plane binaries the tests run (etcd, kube-apiserver, kubectl, helm)
# from Go modules into bin/k8s/<version>/, keyed by version and rebuilt only when missing.
# There is no Docker and no download site here, so setup-envtest cannot fetch them; see
# ../shared/K8S-TESTING.md. Prints the folder to use as KUBEBUILDER_ASSETS.
#
# Cold: about 8 minutes on 2 cores (the Go build cache makes a rebuild take seconds).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
K8S_VERSION=v1.37.2
ETCD_VERSION=v3.7.3
HELM_VERSION=v3.22.0
out="$root/bin/k8s/${K8S_VERSION}-etcd${ETCD_VERSION}-helm${HELM_VERSION}"
need=0
for b in etcd kube-apiserver kubectl helm; do [ -x "$out/$b" ] || need=1; done
if [ "$need" = 1 ]; then
  mkdir -p "$out.tmp"
  cd "$root/hack/k8sbin"
  ver="-X k8s.io/component-base/version.gitVersion=${K8S_VERSION} -X k8s.io/client-go/pkg/version.gitVersion=${K8S_VERSION} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37"
  echo "hack/envtest-bins.sh: building etcd, kube-apiserver, kubectl, helm into $out (first time ~8 min)" >&2
  # -p 2: the machine has 2 cores; kube-apiserver's link peaks near 3 GB.
  go build -mod=mod -trimpath -ldflags "-s -w ${ver} -X helm.sh/helm/v3/internal/version.version=${HELM_VERSION}" \
    -o "$out.tmp/" ./etcd k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl helm.sh/helm/v3/cmd/helm >&2
  rm -rf "$out"
  mv "$out.tmp" "$out"
fi
echo "$out"
