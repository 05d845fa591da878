// Package node runs a one-node Kubernetes cluster with a real kubelet, containerd and runc for
// tests: Start (or Up) brings containerd, etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, the kubelet and kube-proxy up under a folder of the run, with certificates
// made for it, and waits until the node is Ready; Down stops it and puts the machine back as
// it was (TakeSnapshot and Diff check that). It needs root, the Debian packages it installs
// when missing (containerd, runc, containernetworking-plugins, iptables, conntrack, nftables)
// and the binaries of hack/envtest-bins.sh and hack/node-bins.sh.
//
// Everything listens on loopback or on the node's own bridge (Bridge, NodeIP); pod and
// Service traffic stays on the machine (no masquerade, a FORWARD guard, no name servers).
// Images come from tarballs imported into containerd (WriteImage, BuildGoImage,
// ImportImage); pods use them with imagePullPolicy Never. docs/operations.md, "Testing on a
// real node", describes the configuration and what teardown restores.
package node
