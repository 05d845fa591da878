#!/usr/bin/env bash
# A one-node Kubernetes cluster with a real kubelet, containerd and runc, for a person at a
# shell (the tests use the Go package test/testutil/node directly). Needs root.
#
#   hack/node.sh up DIR     # build what is missing, bring the node up under DIR, leave it running
#   hack/node.sh down DIR   # tear it down: processes, pods, bridge, iptables, cgroups, mounts, sysctls
#
# `up` prints the environment to use it (KUBECONFIG, CONTAINER_RUNTIME_ENDPOINT for crictl,
# CONTAINERD_ADDRESS for ctr, PATH): eval "$(hack/node.sh up DIR | tail -1)".
# docs/operations.md "Testing on a real node" describes what it runs and what it cleans up.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -ne 2 ] || { [ "$1" != up ] && [ "$1" != down ]; }; then
  echo "usage: hack/node.sh up|down DIR" >&2
  exit 2
fi
mkdir -p "$root/bin"
(cd "$root" && go build -o "$root/bin/nodectl" ./test/testutil/node/nodectl)
if [ "$1" = up ]; then
  export KUBEBUILDER_ASSETS="${KUBEBUILDER_ASSETS:-$("$root/hack/envtest-bins.sh")}"
  export ACTGATE_NODE_BINS="${ACTGATE_NODE_BINS:-$("$root/hack/node-bins.sh")}"
fi
mkdir -p "$2"
cd "$root"
exec "$root/bin/nodectl" "$1" "$(cd "$2" && pwd)"
