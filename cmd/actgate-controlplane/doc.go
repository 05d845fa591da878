// Command actgate-controlplane runs actgate's Kubernetes control plane:
//
//	actgate-controlplane manager     controllers and admission webhooks (docs/operations.md)
//	actgate-controlplane authority   the authority service: ActReviews, Lease issue and consume
//
// It is its own binary so that the actgate binary (the standalone gate, the sidecar and the
// protocol CLI) links no Kubernetes client and builds quickly; both ship in the one image.
// Exit statuses are actgate's (0 success, 1 rejected, 2 usage).
package main
