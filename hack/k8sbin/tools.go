//go:build tools

// Package k8sbin pins the main packages built by hack/envtest-bins.sh (etcd, kube-apiserver,
// kubectl, helm) and hack/node-bins.sh (kubelet, kube-scheduler, kube-controller-manager,
// kube-proxy).
package k8sbin

import (
	_ "go.etcd.io/etcd/server/v3/etcdmain"
	_ "helm.sh/helm/v3/cmd/helm"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
