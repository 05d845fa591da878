// Package authority holds the envtest suites of the authority side of actgate in Kubernetes:
// the Lease-backed authority store (internal/authority/leasestore) and the authority service
// (internal/review/service, `actgate-controlplane authority`), each run against a real kube-apiserver and
// etcd built by hack/envtest-bins.sh. The tests skip under -short.
package authority
