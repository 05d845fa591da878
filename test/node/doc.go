// Package node is actgate's suite on a real node: a one-node cluster with a real kubelet,
// containerd and runc (test/testutil/node), the actgate image imported into containerd, the
// chart installed with `helm install --wait`, and the deployment proven with real pods.
//
// The story:
//
//  1. bring the node up; import the actgate image (ACTGATE_IMAGE_TAR, from `make image`, or
//     one built here from this tree in the same layout) and the suite's fixture image (the
//     agent and upstream programs beside this file); `helm install --wait` the chart with it;
//  2. run the payments MCP server (test/node/upstream, credential-checking, counting its own
//     calls) as a pod behind a Service; `kubectl apply` the sample ToolPolicy pointed at it;
//     run the agent pod (test/node/agent) in a namespace labelled for injection and see the
//     sidecar injected;
//  3. drive the agent over its control port, every call going through the injected sidecar:
//     a hot-path read runs with the credential only the sidecar holds; a call the policy
//     denies never reaches the upstream (its own counters); an escalated call raises a
//     BindingMoment, `kubectl actgate resolve` as the principal resolves it, and the retry
//     runs exactly once; a replay is refused; the agent container holds the credential
//     nowhere in its environment or filesystem and the upstream refuses it without one; the
//     sidecar was started before the agent; `kubectl get acts` shows it all;
//  4. what only a real pod shows: the sidecar's projected token is bound to its pod; a sidecar
//     SIGKILLed mid-dispatch restarts, refuses the action EF_INDETERMINATE and its outbox
//     reports the INDETERMINATE to the Act; a pod deleted mid-call stops the agent first, and
//     its Act is held INDETERMINATE by the manager (DispatcherGone) once the pod is gone;
//  5. the lifecycle: steps 1 and 2 are README.md's Kubernetes quickstart, command by command
//     (readme_test.go); then docs/operations.md "Upgrading" with a live pod, a pending moment
//     and INDETERMINATE Acts, a `helm rollback` behind a newer sidecar, and "Uninstalling":
//     governed namespaces refuse new pods, the running sidecar refuses protected calls, the
//     manager's RoleBindings are collected, and the documented objects stay
//     (lifecycle_test.go).
//
// Names resolve through the agent pod's hostAliases (the node runs no cluster DNS). The
// suite needs root; it never skips a step silently: when the node cannot come up the suite
// fails with the reason. It skips under -short.
package node
