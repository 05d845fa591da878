// Package v1alpha1 is the Kubernetes API of actgate, group actgate.io, version v1alpha1.
//
// Three namespaced kinds:
//
//   - ToolPolicy declares which tool servers are protected for which agent pods and what a call
//     needs before it may become effective: a consequence class, an evidence requirement (none, a
//     policy permit, or named humans through a binding moment), CEL argument constraints,
//     destination allowlists, provenance rules and the alternatives a gate-authored binding moment
//     offers. Its Spec is also the policy file of the standalone gate (`actgate serve`), which
//     reads the same Go type from YAML.
//   - Act is the ledger entry of one AgentCandidateAct (tool-use-binding §10) that reached the
//     authority service: an immutable spec of digests and identities (never raw arguments) and a
//     status that follows the Action Evidence Boundary lifecycle (VERIFIED … CONSUMED,
//     DISPATCH_PENDING, INVOKED, EXECUTED | FAILED | INDETERMINATE).
//   - BindingMoment carries one binding-moment envelope (binding-moment-envelope-04 §4) to the
//     named principal, and the principal's resolution (§7.3) back.
//
// Single-object rules (bounds, cross-field requirements, immutability, lifecycle transitions) are
// CEL XValidation rules in the generated CRDs, so the API server enforces them without a webhook;
// cross-object checks (the resolving user is the named principal, argument CEL compiles) belong to
// the admission webhooks in webhook/.
//
// The generated files are zz_generated.deepcopy.go here and config/crd/bases; run
// `make generate manifests` after editing a type, `make verify` fails when they are stale.
//
// +kubebuilder:object:generate=true
// +groupName=actgate.io
package v1alpha1
