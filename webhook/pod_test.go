package webhook

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/webhook/inject"
)

func injector(t *testing.T, rec events.EventRecorder, objs ...client.Object) *PodInjector {
	t.Helper()
	cfg := inject.Config{Image: "actgate:test", AuthorityURL: "https://authority:443", OptOutNamespaces: []string{"sandbox"}}.Default()
	return &PodInjector{Reader: reader(t, objs...), Config: &cfg, Recorder: rec, Log: logr.Discard()}
}

func podRequest(t *testing.T, op admissionv1.Operation, sub string, pod, old *corev1.Pod) admission.Request {
	t.Helper()
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Operation: op, SubResource: sub,
		Namespace: pod.Namespace, Object: runtime.RawExtension{Raw: raw},
	}}
	if old != nil {
		if req.OldObject.Raw, err = json.Marshal(old); err != nil {
			t.Fatal(err)
		}
	}
	return req
}

func tokenPod(ns, name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "a",
			Env: []corev1.EnvVar{{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "token"}}}}}}},
	}
}

func toolPolicy(ns string, sel map[string]string) *v1alpha1.ToolPolicy {
	return &v1alpha1.ToolPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"},
		Spec: v1alpha1.ToolPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: sel}, Servers: []v1alpha1.ToolServer{{
			Name: "tools", URL: "https://tools.example/mcp", CredentialsSecretRef: &v1alpha1.SecretKeyRef{Name: "creds", Key: "token"}}}},
	}
}

func TestPodInjector(t *testing.T) {
	gov := map[string]string{inject.LabelInject: "true"}
	agent := map[string]string{"app": "agent"}
	for _, tc := range []struct {
		name      string
		objs      []client.Object
		pod       *corev1.Pod
		dryRun    bool
		allowed   bool
		patched   bool
		code      int32  // for errors
		msg       string // in the result message
		event     string // substring of the recorded event; "" = none
		audit     string
		warnsWith string
	}{
		{name: "governed and selected: patched", objs: []client.Object{namespaceObj("agents", gov), toolPolicy("agents", agent)},
			pod: tokenPod("agents", "a", agent), allowed: true, patched: true, audit: "injected: NamespaceEnabled"},
		{name: "opt-out ignored: patched with a warning", objs: []client.Object{namespaceObj("agents", gov), toolPolicy("agents", agent)},
			pod: tokenPod("agents", "a", map[string]string{"app": "agent", inject.LabelInject: "false"}), allowed: true, patched: true,
			warnsWith: "is ignored in namespace agents"},
		{name: "not selected, holds the credential: denied", objs: []client.Object{namespaceObj("agents", gov), toolPolicy("agents", agent)},
			pod: tokenPod("agents", "b", map[string]string{"app": "other"}), code: http.StatusForbidden, msg: "no ToolPolicy selects this pod"},
		// A name the pod's author chose exempts nothing: the same container named like the
		// sidecar is refused as the one named "agent" is.
		{name: "not selected, its own container named like the sidecar holds the credential: denied",
			objs: []client.Object{namespaceObj("agents", gov), toolPolicy("agents", agent)},
			pod: func() *corev1.Pod {
				p := tokenPod("agents", "b", map[string]string{"app": "other"})
				p.Spec.Containers[0].Name = inject.SidecarName
				return p
			}(), code: http.StatusForbidden, msg: `no ToolPolicy selects this pod: inject: pod cannot be governed by the actgate sidecar: container "actgate-sidecar": names starting with "actgate-" are reserved`},
		{name: "not selected, its own init container named like the sidecar, no credential: denied",
			objs: []client.Object{namespaceObj("agents", gov), toolPolicy("agents", agent)},
			pod: func() *corev1.Pod {
				p := tokenPod("agents", "b", nil)
				p.Spec.Containers[0].Env = nil
				p.Spec.InitContainers = []corev1.Container{{Name: inject.SidecarName, Image: "x", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}}
				return p
			}(), code: http.StatusForbidden, msg: `init container "actgate-sidecar"`},
		{name: "selected, its own container named like the sidecar: denied",
			objs: []client.Object{namespaceObj("agents", gov), toolPolicy("agents", agent)},
			pod: func() *corev1.Pod {
				p := tokenPod("agents", "a", agent)
				p.Spec.Containers[0].Name = inject.SidecarName
				return p
			}(), code: http.StatusForbidden, msg: `container "actgate-sidecar" that the actgate injector did not add`},
		{name: "not selected, no credential: skipped with an Event", objs: []client.Object{namespaceObj("agents", gov), toolPolicy("agents", agent)},
			pod:     func() *corev1.Pod { p := tokenPod("agents", "b", nil); p.Spec.Containers[0].Env = nil; return p }(),
			allowed: true, event: "InjectionSkipped NoToolPolicy: actgate sidecar not injected into pod b", audit: "skipped: NoToolPolicy"},
		{name: "dry run: skipped without an Event", objs: []client.Object{namespaceObj("agents", gov)}, dryRun: true,
			pod: func() *corev1.Pod { p := tokenPod("agents", "b", nil); p.Spec.Containers[0].Env = nil; return p }(), allowed: true},
		{name: "opted out where allowed: skipped with an Event", objs: []client.Object{namespaceObj("sandbox", gov), toolPolicy("sandbox", agent)},
			pod: tokenPod("sandbox", "c", map[string]string{"app": "agent", inject.LabelInject: "false"}), allowed: true, event: "PodOptedOut"},
		{name: "a generated pod's Event goes to its owner", objs: []client.Object{namespaceObj("agents", gov)},
			pod: func() *corev1.Pod {
				p := tokenPod("agents", "", nil)
				p.GenerateName, p.Spec.Containers[0].Env = "web-", nil
				p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "u", Controller: ptr.To(true)}}
				return p
			}(), allowed: true, event: "pod web-…"},
		{name: "namespace unreadable: error (fail closed)", pod: tokenPod("ghost", "a", agent), code: http.StatusInternalServerError, msg: "read namespace ghost"},
		{name: "a pod the sidecar cannot govern: denied", objs: []client.Object{namespaceObj("agents", gov), toolPolicy("agents", agent)},
			pod: func() *corev1.Pod { p := tokenPod("agents", "a", agent); p.Spec.HostNetwork = true; return p }(), code: http.StatusForbidden, msg: "hostNetwork"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := events.NewFakeRecorder(4)
			h := injector(t, rec, tc.objs...)
			req := podRequest(t, admissionv1.Create, "", tc.pod, nil)
			req.DryRun = ptr.To(tc.dryRun)
			resp := h.Handle(context.Background(), req)
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed = %v (%+v), want %v", resp.Allowed, resp.Result, tc.allowed)
			}
			if !tc.allowed && (resp.Result.Code != tc.code || !strings.Contains(resp.Result.Message, tc.msg)) {
				t.Fatalf("result %d %q, want %d containing %q", resp.Result.Code, resp.Result.Message, tc.code, tc.msg)
			}
			injected := slices.ContainsFunc(resp.Patches, func(op jsonpatch.JsonPatchOperation) bool { return strings.HasPrefix(op.Path, "/spec/initContainers") })
			if injected != tc.patched {
				t.Errorf("patches %v, want injected=%v", resp.Patches, tc.patched)
			}
			// Every admitted pod carries the injector's mark, which the policy kept after an
			// uninstall looks for; a refused one gets none.
			if got := admittedValue(resp.Patches); !admittedAsWanted(got, tc.allowed, tc.patched, tc.audit) {
				t.Errorf("%s = %q for allowed=%v injected=%v audit %q (patches %v)", inject.AnnotationAdmitted, got, tc.allowed, tc.patched, tc.audit, resp.Patches)
			}
			if tc.audit != "" && !strings.HasPrefix(resp.AuditAnnotations[AuditAnnotationDecision], tc.audit) {
				t.Errorf("audit %q, want prefix %q", resp.AuditAnnotations[AuditAnnotationDecision], tc.audit)
			}
			if tc.warnsWith != "" && (len(resp.Warnings) == 0 || !strings.Contains(resp.Warnings[0], tc.warnsWith)) {
				t.Errorf("warnings %v, want one containing %q", resp.Warnings, tc.warnsWith)
			}
			select {
			case ev := <-rec.Events:
				if tc.event == "" || !strings.Contains(ev, tc.event) {
					t.Errorf("event %q, want one containing %q", ev, tc.event)
				}
			default:
				if tc.event != "" {
					t.Errorf("no event, want one containing %q", tc.event)
				}
			}
		})
	}
}

// admittedAsWanted reports whether got is the AnnotationAdmitted value a response should set:
// none on a refusal, "injected", or "skipped: REASON" (the audit annotation's first reason,
// when the case names it).
func admittedAsWanted(got string, allowed, injected bool, audit string) bool {
	switch {
	case !allowed:
		return got == ""
	case injected:
		return got == inject.AdmittedInjected
	}
	if reason, ok := strings.CutPrefix(audit, "skipped: "); ok {
		return got == "skipped: "+strings.Split(reason, ", ")[0]
	}
	return strings.HasPrefix(got, "skipped: ") && len(got) > len("skipped: ")
}

// admittedValue is the AnnotationAdmitted value patches set ("" when none does).
func admittedValue(patches []jsonpatch.JsonPatchOperation) string {
	for _, op := range patches {
		switch op.Path {
		case "/metadata/annotations":
			if m, ok := op.Value.(map[string]any); ok {
				v, _ := m[inject.AnnotationAdmitted].(string)
				return v
			}
			if m, ok := op.Value.(map[string]string); ok {
				return m[inject.AnnotationAdmitted]
			}
		case "/metadata/annotations/" + strings.ReplaceAll(inject.AnnotationAdmitted, "/", "~1"):
			v, _ := op.Value.(string)
			return v
		}
	}
	return ""
}

func TestPodInjectorEphemeral(t *testing.T) {
	h := injector(t, nil, toolPolicy("agents", nil))
	old := tokenPod("agents", "a", nil)
	old.Spec.Containers[0].Env = nil
	add := func(ec corev1.EphemeralContainer) *corev1.Pod {
		p := old.DeepCopy()
		p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, ec)
		return p
	}
	debug := corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox"}}
	withOld := add(debug)
	for _, tc := range []struct {
		name    string
		old     *corev1.Pod
		pod     *corev1.Pod
		allowed bool
	}{
		{"plain debug container", old, add(debug), true},
		{"targets the sidecar", old, add(corev1.EphemeralContainer{EphemeralContainerCommon: debug.EphemeralContainerCommon, TargetContainerName: inject.SidecarName}), false},
		{"mounts the token", old, add(corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "d", Image: "b",
			VolumeMounts: []corev1.VolumeMount{{Name: inject.VolumeToken, MountPath: "/t"}}}}), false},
		{"mounts the journal", old, add(corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "d", Image: "b",
			VolumeMounts: []corev1.VolumeMount{{Name: inject.VolumeJournal, MountPath: "/j"}}}}), false},
		{"envFrom the credential Secret", old, add(corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "d", Image: "b",
			EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}}}}}), false},
		{"named like the sidecar, holds the credential by secretKeyRef", old, add(corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: inject.SidecarName, Image: "b", Env: []corev1.EnvVar{{Name: "T", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "token"}}}}}}), false},
		{"named actgate-…", old, add(corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "actgate-debug", Image: "b"}}), false},
		{"mounts a volume named actgate-…", old, add(corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "d", Image: "b",
			VolumeMounts: []corev1.VolumeMount{{Name: "actgate-extra", MountPath: "/x"}}}}), false},
		{"an existing container is not judged again", withOld, withOld, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := h.Handle(context.Background(), podRequest(t, admissionv1.Update, "ephemeralcontainers", tc.pod, tc.old))
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed = %v (%v), want %v", resp.Allowed, resp.Result, tc.allowed)
			}
		})
	}
	// Other pod updates are not this webhook's business.
	if resp := h.Handle(context.Background(), podRequest(t, admissionv1.Update, "", old, old)); !resp.Allowed {
		t.Errorf("a plain pod update was refused: %v", resp.Result)
	}
}
