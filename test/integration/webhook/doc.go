// Package webhook holds actgate's admission-webhook and deployment integration tests: the
// webhooks of package webhook registered with a real kube-apiserver (test/envtest) through the
// configurations in config/webhook, requests made as real users with the real kubectl, and the
// Helm chart linted, rendered against a golden file and installed into a real API server.
//
// The tests need the control-plane binaries (hack/envtest-bins.sh) and are skipped under
// -short, except the chart's CRD sync check, which reads files only.
package webhook
