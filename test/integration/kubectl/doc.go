// Package kubectl holds the integration tests of the kubectl plugin (cmd/kubectl-actgate)
// against a real kube-apiserver (test/envtest): the plugin binary is built into a temporary
// folder put first on PATH, and every command goes through the real kubectl built in bin/k8s,
// as a user provisioned with its own kubeconfig. The package has no non-test code.
package kubectl
