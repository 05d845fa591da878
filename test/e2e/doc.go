// Package e2e is actgate's end-to-end test with every real binary: a real kube-apiserver and etcd
// (test/envtest), the chart installed with the real helm, the real kubectl and the kubectl plugin,
// and actgate's own processes — `actgate-controlplane manager` (controllers and admission
// webhooks), `actgate-controlplane authority` and `actgate sidecar` — built once with `go build`
// and run as local processes pointed at the API server, since nothing runs Pods here (no
// kubelet). The MCP server and client are the official Go SDK.
//
// The story:
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
//     replay never runs again (the recorded result in the same session, a new escalation from
//     another); `kubectl get acts` shows it all, the calls that ran EXECUTED (the
//     sidecar reports each outcome it journaled to the authority service).
//
// The sidecar is run with exactly what the injection gives it: its variables, the downward API
// resolved, and each volume it mounts made in a local folder (Secrets, the annotations the
// downward API projects, the service-account token requested with the real kubectl for the
// projection's audience, emptyDirs), with every variable that points into a mount rewritten to
// that folder. Only the listen address and the authority's address are replaced. Whatever the
// sidecar needs and the injection does not provide is reported as a failure and supplied
// locally, so the rest of the story still runs; so is RBAC the chart does not grant the
// authority service (service.PolicyRules), and an argument of a chart Deployment that the
// binary refuses.
//
// TestSDKSuitesAgainstSidecar reuses step 1 (startControlPlane) and runs the host-loop wrappers'
// own suites (sdk/go, sdk/typescript, sdk/python) against injected sidecars run the same way,
// under ToolPolicies of testdata/hostloop/policy.yaml's rules, alice resolving with `kubectl
// actgate resolve` (docs/api.md "The wrappers' tests run against both deployments").
//
// The tests skip under -short; TestEndToEnd takes about a minute when the Go build cache is
// warm, TestSDKSuitesAgainstSidecar a few more (the three suites, one after another).
package e2e
