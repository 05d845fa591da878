package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/webhook/inject"
)

// ErrInjectedPartChanged: an update would change what the injector added to a running pod —
// the sidecar (its image above all; a pod's container images are mutable), the volumes it
// added, or actgate's labels and annotations — and the user is not actgate.
var ErrInjectedPartChanged = errors.New("only actgate may change what its injector added to a running pod")

// actgateKeyDomain is the label and annotation prefix the guard keeps to actgate: every key
// whose prefix (the part before "/") is actgate.io or a subdomain of it.
const actgateKeyDomain = "actgate.io"

// PodGuard is the validating admission handler for pod UPDATE (pods and pods/resize): on a pod
// the injector governs, only the users in ActgateUsers may change
//
//   - the containers the injector added (the sidecar and any actgate-… container its
//     actgate.io/status names): image, resources and every other field, compared whole;
//   - the volumes it added (the token, credentials and journal volumes and those the status
//     names);
//   - labels and annotations whose key is under actgate.io/, and the annotations the status
//     names (the scrape annotations it set).
//
// nor, by changing the pod's labels, change which ToolPolicies select it (GovernanceChange): the
// authority service picks the governing policy by the calling pod's current labels, so a
// relabelled agent would be judged by another policy than the one its sidecar was injected for.
//
// Everything else of the pod stays as open as Kubernetes leaves it (the agent's own images,
// other labels and annotations, tolerations, activeDeadlineSeconds), as PodSecurity admission
// leaves metadata-only updates alone. A pod the injector never touched (no sidecar and no
// readable status) is not guarded. The decision is DecidePodUpdate, a pure function.
//
// The user is matched by user name only, never by group (PodSecurity admission's exemptions
// work the same way): a group such as system:serviceaccounts:actgate-system would let every
// workload of that namespace through.
type PodGuard struct {
	// Reader lists the namespace's ToolPolicies when an injected pod's labels change
	// (SetupWithManager passes the uncached API reader).
	Reader client.Reader
	// ActgateUsers are the user names that may change injected parts (Config.ActgateUsers).
	ActgateUsers []string
	// Log is the handler's logger.
	Log logr.Logger
}

var _ admission.Handler = (*PodGuard)(nil)

// Handle implements admission.Handler.
func (g *PodGuard) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Kind.Kind != "Pod" {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("pod guard called for %s", req.Kind.Kind))
	}
	if req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	switch req.SubResource {
	case "", "resize":
	default:
		// The configuration sends only pods and pods/resize; another subresource (status,
		// ephemeralcontainers) is not this handler's.
		return admission.Allowed("")
	}
	pod, old := &corev1.Pod{}, &corev1.Pod{}
	if err := json.Unmarshal(req.Object.Raw, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode pod: %w", err))
	}
	if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode old pod: %w", err))
	}
	if old.Namespace == "" {
		old.Namespace = req.Namespace
	}
	if pod.Namespace == "" {
		pod.Namespace = req.Namespace
	}
	d := DecidePodUpdate(old, pod, req.UserInfo.Username, g.ActgateUsers)
	if d.Allowed && Injected(old) && !maps.Equal(old.Labels, pod.Labels) && !slices.Contains(g.ActgateUsers, req.UserInfo.Username) {
		if g.Reader == nil {
			return admission.Errored(http.StatusInternalServerError, errors.New("actgate: pod guard has no reader for ToolPolicies"))
		}
		policies := &v1alpha1.ToolPolicyList{}
		if err := g.Reader.List(ctx, policies, client.InNamespace(old.Namespace)); err != nil {
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("actgate: list ToolPolicies in %s: %w", old.Namespace, err))
		}
		change, err := GovernanceChange(old, pod, policies.Items)
		if err != nil {
			change = err.Error() // which policies select the pod is unknown: fail closed
		}
		if change != "" {
			d = PodUpdateDecision{Changes: []string{change}, Reason: fmt.Sprintf("actgate: %s: %s may not change %s of pod %s/%s by relabelling it",
				ErrInjectedPartChanged, req.UserInfo.Username, change, old.Namespace, old.Name)}
		}
	}
	if d.Allowed {
		if len(d.Changes) == 0 {
			return admission.Allowed("")
		}
		resp := admission.Allowed("")
		resp.AuditAnnotations = map[string]string{AuditAnnotationDecision: "actgate changed injected parts: " + strings.Join(bounded(d.Changes), "; ")}
		return resp
	}
	g.Log.Info("Refused pod update", "pod", klogRef(old), "user", req.UserInfo.Username, "changes", bounded(d.Changes))
	resp := admission.Denied(d.Reason)
	resp.AuditAnnotations = map[string]string{AuditAnnotationDecision: "denied: " + strings.Join(bounded(d.Changes), "; ")}
	return resp
}

// PodUpdateDecision is DecidePodUpdate's verdict.
type PodUpdateDecision struct {
	// Allowed is the verdict.
	Allowed bool
	// Changes name what the update changes of the injected parts, in pod order (empty when it
	// touches none).
	Changes []string
	// Reason is the refusal's message (empty when allowed).
	Reason string
}

// maxListedChanges bounds how many changes a refusal names.
const maxListedChanges = 3

// DecidePodUpdate decides an update of old into pod by user (see PodGuard): allowed when it
// changes none of the injected parts, or when user is one of actgate. old is the stored pod, so
// what counts as injected is read from it, never from the update.
func DecidePodUpdate(old, pod *corev1.Pod, user string, actgate []string) PodUpdateDecision {
	changes := InjectedChanges(old, pod)
	if len(changes) == 0 || slices.Contains(actgate, user) {
		return PodUpdateDecision{Allowed: true, Changes: changes}
	}
	listed := bounded(changes)
	who := user
	if who == "" {
		who = "an anonymous user"
	}
	return PodUpdateDecision{Changes: changes, Reason: fmt.Sprintf("actgate: %s: %s may not change %s of pod %s/%s; recreate the pod (roll its workload) to get a new sidecar",
		ErrInjectedPartChanged, who, strings.Join(listed, ", "), old.Namespace, old.Name)}
}

// GovernanceChange names how an update of old into pod changes which of policies select the
// pod (inject.Select on its labels), e.g. "the ToolPolicies selecting it (billing/payments →
// billing/admin)"; "" when the same ones select it before and after. A selector that does not
// parse is an error.
func GovernanceChange(old, pod *corev1.Pod, policies []v1alpha1.ToolPolicy) (string, error) {
	before, err := inject.Select(old, policies)
	if err != nil {
		return "", err
	}
	after, err := inject.Select(pod, policies)
	if err != nil {
		return "", err
	}
	names := func(ps []v1alpha1.ToolPolicy) []string {
		out := make([]string, len(ps))
		for i, p := range ps {
			out[i] = p.Namespace + "/" + p.Name
		}
		return out
	}
	b, a := names(before), names(after)
	if slices.Equal(b, a) {
		return "", nil
	}
	show := func(n []string) string {
		if len(n) == 0 {
			return "none"
		}
		if len(n) > maxListedChanges {
			n = append(slices.Clone(n[:maxListedChanges]), "…")
		}
		return strings.Join(n, ", ")
	}
	return fmt.Sprintf("the ToolPolicies selecting it (%s → %s)", show(b), show(a)), nil
}

// bounded is changes cut to maxListedChanges, with a count of the rest: the keys come from the
// update, so how many a message, log line or audit annotation names is bounded.
func bounded(changes []string) []string {
	if len(changes) <= maxListedChanges {
		return changes
	}
	return append(slices.Clone(changes[:maxListedChanges]), fmt.Sprintf("and %d more", len(changes)-maxListedChanges))
}

// Injected reports whether the injector governs pod: it runs the sidecar or carries a readable
// actgate.io/status.
func Injected(pod *corev1.Pod) bool {
	if _, ok := inject.StatusOf(pod); ok {
		return true
	}
	return slices.ContainsFunc(pod.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == inject.SidecarName }) ||
		slices.ContainsFunc(pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == inject.SidecarName })
}

// InjectedChanges lists what an update of old into pod changes of the parts the injector added
// to old (see PodGuard), e.g. `init container actgate-sidecar image`, `annotation
// actgate.io/status`. It is empty when old is not Injected.
func InjectedChanges(old, pod *corev1.Pod) []string {
	if !Injected(old) {
		return nil
	}
	st, _ := inject.StatusOf(old)
	if st == nil {
		st = &inject.Status{}
	}
	var out []string
	out = append(out, containerChanges("init container", injectedNames(st.InitContainers, inject.SidecarName), old.Spec.InitContainers, pod.Spec.InitContainers)...)
	out = append(out, containerChanges("container", injectedNames(st.Containers, inject.SidecarName), old.Spec.Containers, pod.Spec.Containers)...)
	vols := InjectedVolumes(old)
	for _, name := range unionNames(volumeNames(old.Spec.Volumes), volumeNames(pod.Spec.Volumes)) {
		if !vols[name] {
			continue
		}
		a, b := findVolume(old.Spec.Volumes, name), findVolume(pod.Spec.Volumes, name)
		if a == nil || b == nil || !equality.Semantic.DeepEqual(*a, *b) {
			out = append(out, "volume "+name)
		}
	}
	out = append(out, metadataChanges("label", old.Labels, pod.Labels, nil)...)
	injectedAnnotations := map[string]bool{}
	for _, a := range st.Annotations {
		injectedAnnotations[a] = true
	}
	out = append(out, metadataChanges("annotation", old.Annotations, pod.Annotations, injectedAnnotations)...)
	return out
}

// InjectedVolumes names the volumes the injector added to pod: the token, credentials and
// journal volumes, and the actgate-… volumes its status lists.
func InjectedVolumes(pod *corev1.Pod) map[string]bool {
	var listed []string
	if st, ok := inject.StatusOf(pod); ok {
		listed = st.Volumes
	}
	return injectedNames(listed, inject.VolumeToken, inject.VolumeCredentials, inject.VolumeJournal)
}

// injectedNames is the set of fixed names plus the actgate-… names a status lists (only those:
// a status cannot claim the pod's own containers or volumes).
func injectedNames(listed []string, fixed ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range fixed {
		m[n] = true
	}
	for _, n := range listed {
		if strings.HasPrefix(n, "actgate-") {
			m[n] = true
		}
	}
	return m
}

// containerChanges compares the injected containers of one list, field by field for the
// message and whole for the verdict.
func containerChanges(kind string, injected map[string]bool, old, cur []corev1.Container) []string {
	var out []string
	names := unionNames(containerNames(old), containerNames(cur))
	for _, name := range names {
		if !injected[name] {
			continue
		}
		a, b := inject.FindContainer(old, name), inject.FindContainer(cur, name)
		switch {
		case a == nil:
			out = append(out, kind+" "+name+" (added)")
		case b == nil:
			out = append(out, kind+" "+name+" (removed)")
		case !equality.Semantic.DeepEqual(*a, *b):
			out = append(out, kind+" "+name+" "+changedFields(a, b))
		}
	}
	return out
}

// changedFields names the fields of a container that differ, for the refusal message.
func changedFields(a, b *corev1.Container) string {
	var f []string
	add := func(name string, same bool) {
		if !same {
			f = append(f, name)
		}
	}
	add("image", a.Image == b.Image)
	add("resources", equality.Semantic.DeepEqual(a.Resources, b.Resources))
	add("resizePolicy", equality.Semantic.DeepEqual(a.ResizePolicy, b.ResizePolicy))
	add("command", slices.Equal(a.Command, b.Command))
	add("args", slices.Equal(a.Args, b.Args))
	add("env", equality.Semantic.DeepEqual(a.Env, b.Env) && equality.Semantic.DeepEqual(a.EnvFrom, b.EnvFrom))
	add("volumeMounts", equality.Semantic.DeepEqual(a.VolumeMounts, b.VolumeMounts))
	add("securityContext", equality.Semantic.DeepEqual(a.SecurityContext, b.SecurityContext))
	if len(f) == 0 {
		return "spec"
	}
	return strings.Join(f, "+")
}

// metadataChanges lists the keys of one map (labels or annotations) that are added, removed
// or changed, among keys under actgate.io/ and the extra keys, in sorted order.
func metadataChanges(kind string, old, cur map[string]string, extra map[string]bool) []string {
	keys := map[string]bool{}
	for k := range old {
		keys[k] = true
	}
	for k := range cur {
		keys[k] = true
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if !actgateKey(k) && !extra[k] {
			continue
		}
		a, inOld := old[k]
		b, inCur := cur[k]
		if inOld != inCur || a != b {
			out = append(out, kind+" "+clipKey(k))
		}
	}
	return out
}

// actgateKey: the key's prefix is actgate.io or a subdomain of it.
func actgateKey(k string) bool {
	prefix, _, ok := strings.Cut(k, "/")
	if !ok {
		return false
	}
	prefix = strings.ToLower(prefix)
	return prefix == actgateKeyDomain || strings.HasSuffix(prefix, "."+actgateKeyDomain)
}

// clipKey bounds a key in a message (label keys are short; annotation keys are too, but the
// message names what the user sent).
func clipKey(k string) string {
	const maxKey = 80
	if len(k) > maxKey {
		return k[:maxKey] + "…"
	}
	return k
}

func containerNames(cs []corev1.Container) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return out
}

func volumeNames(vs []corev1.Volume) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.Name
	}
	return out
}

// unionNames is a's names then b's names not in a, each once.
func unionNames(a, b []string) []string {
	out := slices.Clone(a)
	for _, n := range b {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

func findVolume(vs []corev1.Volume, name string) *corev1.Volume {
	for i := range vs {
		if vs[i].Name == name {
			return &vs[i]
		}
	}
	return nil
}
