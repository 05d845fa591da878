package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/webhook/inject"
)

// Event reasons and actions of the pod handler (events.k8s.io/v1).
const (
	// EventReasonInjectionSkipped is the reason of the Normal Event on a pod (or its controlling
	// owner) that was not injected; the note starts with the inject.Reason.
	EventReasonInjectionSkipped = "InjectionSkipped"
	// EventActionInject is the Event action.
	EventActionInject = "Inject"
	// AuditAnnotationDecision is the audit annotation key (prefixed by the webhook name by the
	// API server) carrying the decision and reasons.
	AuditAnnotationDecision = "decision"
)

// PodInjector is the mutating admission handler for pods: it injects the actgate sidecar
// (package inject) on CREATE, and refuses ephemeral containers that would reach a credential
// or the sidecar on UPDATE of pods/ephemeralcontainers.
//
// Every failure to learn something (the namespace, the policies) is an error response, which
// the API server turns into a denial under failurePolicy Fail: never an unguarded pod.
type PodInjector struct {
	// Reader reads Namespaces and ToolPolicies (SetupWithManager passes the uncached API
	// reader).
	Reader client.Reader
	// Config is the defaulted, validated injection configuration.
	Config *inject.Config
	// Trust names the authority CA and public key files, read for every injection (they
	// rotate); a file that cannot be read refuses the pod.
	Trust AuthorityTrust
	// Recorder records skip Events; nil records none.
	Recorder events.EventRecorder
	// Log is the handler's logger.
	Log logr.Logger
}

var _ admission.Handler = (*PodInjector)(nil)

// Handle implements admission.Handler.
func (h *PodInjector) Handle(ctx context.Context, req admission.Request) admission.Response {
	switch {
	case req.Kind.Kind != "Pod":
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("pod webhook called for %s", req.Kind.Kind))
	case req.Operation == admissionv1.Create && req.SubResource == "":
		return h.create(ctx, req)
	case req.Operation == admissionv1.Update && req.SubResource == "ephemeralcontainers":
		return h.ephemeral(ctx, req)
	}
	return admission.Allowed("")
}

func (h *PodInjector) create(ctx context.Context, req admission.Request) admission.Response {
	pod := &corev1.Pod{}
	if err := json.Unmarshal(req.Object.Raw, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode pod: %w", err))
	}
	if pod.Namespace == "" {
		pod.Namespace = req.Namespace
	}
	log := h.Log.WithValues("pod", klogRef(pod), "uid", req.UID)

	ns := &corev1.Namespace{}
	if err := h.Reader.Get(ctx, client.ObjectKey{Name: pod.Namespace}, ns); err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("actgate: read namespace %s: %w", pod.Namespace, err))
	}
	required, reasons := inject.InjectRequired(pod, ns, h.Config)
	policies := &v1alpha1.ToolPolicyList{}
	if err := h.Reader.List(ctx, policies, client.InNamespace(pod.Namespace)); err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("actgate: list ToolPolicies in %s: %w", pod.Namespace, err))
	}

	if !required {
		// Not a candidate: leave it, say why. (In an opt-out namespace the admin allowed
		// this; elsewhere the webhook is not normally called for such pods.)
		return h.skip(ctx, req, pod, reasons, log)
	}
	selected, err := inject.Select(pod, policies.Items)
	if err != nil {
		return h.deny(log, reasons, err.Error())
	}
	if len(selected) == 0 {
		// A candidate no policy governs uses no name the injector reserves (a container named
		// like the sidecar is the author's, not actgate's) and must not hold a governed
		// credential: it would call the upstream with no sink in between
		// (docs/architecture.md "Anti-bypass").
		if err := inject.CheckAuthored(pod, h.Config); err != nil {
			return h.deny(log, reasons, "no ToolPolicy selects this pod: "+err.Error())
		}
		if refs := inject.CredentialReferences(pod, inject.CredentialSecrets(policies.Items)); len(refs) > 0 {
			return h.deny(log, reasons, fmt.Sprintf("no ToolPolicy selects this pod, yet %s; only the actgate sidecar of a selected pod may hold it", refs[0]))
		}
		return h.skip(ctx, req, pod, append([]inject.Reason{inject.ReasonNoPolicy}, reasons...), log)
	}

	cfg := *h.Config
	if cfg.AuthorityCA, cfg.AuthorityPublicKey, err = h.Trust.load(); err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("actgate: %w", err))
	}
	out, st, err := inject.Inject(pod, selected, &cfg)
	if err != nil {
		return h.deny(log, reasons, err.Error())
	}
	out.Annotations[inject.AnnotationAdmitted] = inject.AdmittedInjected
	mutated, err := json.Marshal(out)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	resp := admission.PatchResponseFromRaw(req.Object.Raw, mutated)
	resp.AuditAnnotations = map[string]string{AuditAnnotationDecision: "injected: " + joinReasons(reasons)}
	if slices.Contains(reasons, inject.ReasonOptOutIgnored) {
		resp.Warnings = append(resp.Warnings, fmt.Sprintf("actgate: %s=false is ignored in namespace %s; the pod is governed by %s",
			inject.LabelInject, pod.Namespace, strings.Join(st.Policies, ", ")))
	}
	log.V(1).Info("Injected sidecar", "policies", st.Policies, "servers", st.Servers, "reasons", reasons)
	return resp
}

// ephemeral refuses ephemeral containers that mount a credential or a volume the injector added
// (InjectedVolumes), refer to a credential Secret, or target the sidecar (sharing its process
// namespace would expose its files through /proc/<pid>/root).
func (h *PodInjector) ephemeral(ctx context.Context, req admission.Request) admission.Response {
	pod, old := &corev1.Pod{}, &corev1.Pod{}
	if err := json.Unmarshal(req.Object.Raw, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode pod: %w", err))
	}
	if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode old pod: %w", err))
	}
	existing := map[string]bool{}
	for _, c := range old.Spec.EphemeralContainers {
		existing[c.Name] = true
	}
	added := pod.DeepCopy()
	added.Spec.InitContainers, added.Spec.Containers = nil, nil
	added.Spec.EphemeralContainers = slices.DeleteFunc(added.Spec.EphemeralContainers, func(c corev1.EphemeralContainer) bool { return existing[c.Name] })
	if len(added.Spec.EphemeralContainers) == 0 {
		return admission.Allowed("")
	}
	policies := &v1alpha1.ToolPolicyList{}
	if err := h.Reader.List(ctx, policies, client.InNamespace(req.Namespace)); err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("actgate: list ToolPolicies in %s: %w", req.Namespace, err))
	}
	injected := InjectedVolumes(old)
	for _, c := range added.Spec.EphemeralContainers {
		if inject.Reserved(c.Name) {
			return admission.Denied(fmt.Sprintf("actgate: ephemeral container %s: names starting with %q are reserved for what the actgate injector adds",
				c.Name, inject.ReservedPrefix))
		}
		if inject.Reserved(c.TargetContainerName) {
			return admission.Denied(fmt.Sprintf("actgate: ephemeral container %s may not target %s: it would share the sidecar's processes and credentials",
				c.Name, c.TargetContainerName))
		}
		for _, m := range c.VolumeMounts {
			// The token and credentials, and the journal (its receipt-signing key and the
			// dispatch records the sidecar's exactly-once rests on).
			if injected[m.Name] || inject.Reserved(m.Name) {
				return admission.Denied(fmt.Sprintf("actgate: ephemeral container %s may not mount %s: only the sidecar holds it", c.Name, m.Name))
			}
		}
	}
	if refs := inject.CredentialReferences(added, inject.CredentialSecrets(policies.Items)); len(refs) > 0 {
		return admission.Denied(fmt.Sprintf("actgate: ephemeral %s; only the actgate sidecar may hold it", refs[0]))
	}
	return admission.Allowed("")
}

func (h *PodInjector) deny(log logr.Logger, reasons []inject.Reason, msg string) admission.Response {
	log.Info("Refused pod", "reason", msg)
	resp := admission.Denied("actgate: " + msg)
	resp.AuditAnnotations = map[string]string{AuditAnnotationDecision: "denied: " + joinReasons(reasons)}
	return resp
}

// skip admits the pod unchanged and records why in an Event (Linkerd records it on the
// workload; a pod being created has no UID yet, so the Event goes to its controlling owner
// when there is one, else to the pod by name) and in the audit annotation.
func (h *PodInjector) skip(_ context.Context, req admission.Request, pod *corev1.Pod, reasons []inject.Reason, log logr.Logger) admission.Response {
	note := fmt.Sprintf("%s: actgate sidecar not injected into pod %s (%s)", reasons[0], podName(pod), joinReasons(reasons))
	log.V(1).Info("Skipped injection", "reasons", reasons)
	if h.Recorder != nil && (req.DryRun == nil || !*req.DryRun) {
		if regarding := eventTarget(pod); regarding != nil {
			h.Recorder.Eventf(regarding, nil, corev1.EventTypeNormal, EventReasonInjectionSkipped, EventActionInject, "%s", note)
		}
	}
	resp := admission.Patched(string(reasons[0]), admittedPatch(pod, "skipped: "+string(reasons[0])))
	resp.AuditAnnotations = map[string]string{AuditAnnotationDecision: "skipped: " + joinReasons(reasons)}
	return resp
}

// admittedPatch sets inject.AnnotationAdmitted to value, leaving the rest of the pod as its
// author wrote it.
func admittedPatch(pod *corev1.Pod, value string) jsonpatch.JsonPatchOperation {
	if pod.Annotations == nil {
		return jsonpatch.NewOperation("add", "/metadata/annotations", map[string]string{inject.AnnotationAdmitted: value})
	}
	// RFC 6901: "/" in a member name is written "~1".
	return jsonpatch.NewOperation("add", "/metadata/annotations/"+strings.ReplaceAll(inject.AnnotationAdmitted, "/", "~1"), value)
}

// eventTarget is the object a skip Event is about: the pod's controlling owner, else the pod
// when it has a name; nil when neither can be named.
func eventTarget(pod *corev1.Pod) runtime.Object {
	if owner := metav1.GetControllerOf(pod); owner != nil {
		o := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: owner.Name, Namespace: pod.Namespace, UID: owner.UID}}
		o.APIVersion, o.Kind = owner.APIVersion, owner.Kind
		return o
	}
	if pod.Name == "" {
		return nil
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}}
	p.APIVersion, p.Kind = "v1", "Pod"
	return p
}

func podName(pod *corev1.Pod) string {
	if pod.Name != "" {
		return pod.Name
	}
	return pod.GenerateName + "…"
}

func klogRef(pod *corev1.Pod) string { return pod.Namespace + "/" + podName(pod) }

func joinReasons(rs []inject.Reason) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}

// errNoUser is returned when an admission request carries no user (never from a real API
// server); it fails closed.
var errNoUser = errors.New("actgate: admission request has no user")
