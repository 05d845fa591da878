// Package e2e is actgate's end-to-end test with every real binary: a real kube-apiserver and
// etcd (test/envtest), the chart installed with the real helm, the real kubectl and the kubectl
// plugin, and actgate's own processes — `actgate manager` (controllers and admission
// webhooks), `actgate authority` and `actgate sidecar` — built once with `go build` and run as
// local processes pointed at the API server, since nothing runs Pods here (no kubelet;
// K8S-TESTING.md). The MCP server and client are the official Go SDK.
//
// The story (issue 3, "end-to-end test"):
//
//  1. start the API server; `helm install` the chart (its objects must be accepted; nothing
//     rolls out); point its webhook configurations at the local manager; run the manager and
//     the authority service as the chart's own service accounts (client-certificate users of
//     the same names, so the chart's RBAC is what they get);
//  2. `kubectl apply` the sample ToolPolicy; create an agent Pod in a namespace labelled for
//     injection and see the sidecar injected and the credential moved out of the agent;
//  3. run the sidecar with the injected container's environment against a real MCP server and
//     drive a real MCP client through it: an INFORMATIONAL call passes; a FINANCIAL call
//     escalates and a BindingMoment appears; the agent's identity fails to resolve it;
//     `kubectl actgate resolve` as the principal succeeds; the retry runs exactly once; a
//     replay is denied; `kubectl get acts` shows it all.
//
// What the pod would mount but a local process cannot get from the injected spec (the
// authority's CA and public key, the server URLs, the sink id, a writable journal folder) is
// checked for in the injected container and, when absent, reported as a failure and supplied
// locally so the rest of the story still runs.
//
// The test skips under -short and takes about a minute when the Go build cache is warm.
package e2e
