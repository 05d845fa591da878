// Package webhook is actgate's admission control: the pod mutating webhook that injects the
// enforcing sidecar, and the validating webhooks that do what the CRDs' CEL rules cannot
// (cross-object and identity checks; Gateway API's split: single-object rules in CEL, webhooks
// only for the rest). `actgate-controlplane manager` calls SetupWithManager once.
//
// The handlers, each on its own path (see the Path* constants and the kubebuilder markers in
// setup.go, from which `make manifests` writes config/webhook/manifests.yaml):
//
//   - PodInjector (mutating, pods CREATE and pods/ephemeralcontainers UPDATE): package inject
//     decides and computes; this handler reads the namespace and its ToolPolicies, records an
//     Event when it skips a pod, refuses a pod it cannot govern, a pod that holds a governed
//     credential without being governed, and an ephemeral container that would reach the
//     sidecar or a credential (docs/architecture.md "Anti-bypass").
//   - PodGuard (validating, pods and pods/resize UPDATE): on a pod the injector governs, only
//     Config.ActgateUsers may change the injected containers (a pod patch can change a
//     container's image), the injected volumes, actgate.io/ labels and annotations, or relabel
//     the pod into other ToolPolicies (DecidePodUpdate, GovernanceChange).
//   - ToolPolicyValidator (admission.Validator[*v1alpha1.ToolPolicy]): the spec compiles
//     (internal/policy.Compile: CEL, globs, references inside the spec); missing Secrets, an
//     ungoverned namespace and server names shared with another policy are warnings.
//   - BindingMomentValidator (admission.Validator[*v1alpha1.BindingMoment]): the envelope is
//     valid, canonical and has its digest; a resolution is accepted once, only from the user
//     named as principal (admission userInfo), never from the act's agent or a service account
//     of the namespace, before expiry, and only if it passes envelope-04 §7.3 against the
//     stored envelope (docs/architecture.md "Principals").
//   - NamespaceGuard (admission.Validator[*corev1.Namespace]): only configured admins may take a
//     namespace out of governance (Gatekeeper's guarded exemption label).
//
// Everything fails closed: a handler that cannot read what it needs answers with an error, and
// every webhook configuration has failurePolicy Fail, so the API server refuses the request.
//
// # Serving certificates
//
// The handlers run on a webhook server of their own (Config.Server). Its certificate comes
// either from the manager itself (CertModeOperator: open-policy-agent/cert-controller keeps a
// CA and a serving pair in a Secret, injects the CA into both webhook configurations, rotates
// them) or from outside (CertModeExternal: cert-manager through the chart's certManager.enabled,
// or envtest). The files are read on each handshake when they change, so the server starts
// before the kubelet has mounted a new Secret and picks up rotations without a restart.
package webhook
