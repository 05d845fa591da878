package webhook

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/webhook/inject"
)

const (
	guardAgent   = "system:serviceaccount:agents:default"
	guardActgate = "system:serviceaccount:actgate-system:actgate-manager"
	guardAdmin   = "kubernetes-admin"
)

// injectedPod is a pod as the injector stores it: sidecar, token, credentials and journal
// volumes, status and scrape annotations.
func injectedPod(t *testing.T) *corev1.Pod {
	t.Helper()
	cfg := inject.Config{Image: "ghcr.io/actgate/actgate:v1", AuthorityURL: "https://authority:443",
		AuthorityPublicKey: "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA\n-----END PUBLIC KEY-----\n"}.Default()
	pod := tokenPod("agents", "a", map[string]string{"app": "agent"})
	out, _, err := inject.Inject(pod, []v1alpha1.ToolPolicy{*toolPolicy("agents", nil)}, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := out.Annotations[inject.AnnotationPrometheusScrape]; !ok {
		t.Fatalf("the fixture lacks the injected scrape annotation: %v", out.Annotations)
	}
	return out
}

func sidecarOf(p *corev1.Pod) *corev1.Container {
	for i := range p.Spec.InitContainers {
		if p.Spec.InitContainers[i].Name == inject.SidecarName {
			return &p.Spec.InitContainers[i]
		}
	}
	return nil
}

// TestDecidePodUpdate is the guard's truth table: each update, by each kind of user.
func TestDecidePodUpdate(t *testing.T) {
	base := injectedPod(t)
	plain := tokenPod("agents", "plain", nil) // never injected
	users := []string{guardAgent, guardAdmin, "", guardActgate}

	type want struct{ agent, admin, anonymous, actgate bool }
	refused := want{false, false, false, true} // only actgate
	open := want{true, true, true, true}       // anyone RBAC lets through
	for _, tc := range []struct {
		name    string
		old     *corev1.Pod
		mutate  func(p *corev1.Pod)
		want    want
		changes string // a substring of the first change named, for a guarded update
	}{
		{"no change", base, func(*corev1.Pod) {}, open, ""},
		{"sidecar image swapped", base, func(p *corev1.Pod) { sidecarOf(p).Image = "evil.example/fake-sidecar:1" }, refused, "init container actgate-sidecar image"},
		{"sidecar image retagged to a digest of the same repository", base, func(p *corev1.Pod) { sidecarOf(p).Image = "ghcr.io/actgate/actgate@sha256:" + strings.Repeat("0", 64) }, refused, "image"},
		{"sidecar resources resized", base, func(p *corev1.Pod) {
			sidecarOf(p).Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Mi")}
		}, refused, "resources"},
		{"sidecar env changed", base, func(p *corev1.Pod) {
			sidecarOf(p).Env = append(sidecarOf(p).Env, corev1.EnvVar{Name: "ACTGATE_AUTHORITY_PUBLIC_KEY", Value: "forged"})
		}, refused, "env"},
		{"agent container image", base, func(p *corev1.Pod) { p.Spec.Containers[0].Image = "agent:2" }, open, ""},
		{"unrelated label", base, func(p *corev1.Pod) { p.Labels["team"] = "billing" }, open, ""},
		{"unrelated annotation", base, func(p *corev1.Pod) { p.Annotations["note"] = "hello" }, open, ""},
		{"tolerations added", base, func(p *corev1.Pod) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "k", Operator: corev1.TolerationOpExists})
		}, open, ""},
		{"opt-out label added", base, func(p *corev1.Pod) { p.Labels[inject.LabelInject] = "false" }, refused, "label actgate.io/inject"},
		{"opt-out annotation added", base, func(p *corev1.Pod) { p.Annotations[inject.LabelInject] = "false" }, refused, "annotation actgate.io/inject"},
		{"status annotation removed", base, func(p *corev1.Pod) { delete(p.Annotations, inject.AnnotationStatus) }, refused, "annotation actgate.io/status"},
		{"status annotation rewritten", base, func(p *corev1.Pod) { p.Annotations[inject.AnnotationStatus] = `{"version":"v1"}` }, refused, "annotation actgate.io/status"},
		{"trust annotation added", base, func(p *corev1.Pod) { p.Annotations[inject.AnnotationAuthorityPublicKey] = "forged" }, refused, "annotation actgate.io/authority-public-key"},
		{"label of an actgate.io subdomain", base, func(p *corev1.Pod) { p.Labels["review.actgate.io/x"] = "1" }, refused, "label review.actgate.io/x"},
		{"look-alike domain is not actgate's", base, func(p *corev1.Pod) { p.Labels["notactgate.io/x"] = "1" }, open, ""},
		{"injected scrape annotation changed", base, func(p *corev1.Pod) { p.Annotations[inject.AnnotationPrometheusScrape] = "false" }, refused, "annotation prometheus.io/scrape"},
		{"journal volume replaced", base, func(p *corev1.Pod) {
			for i := range p.Spec.Volumes {
				if p.Spec.Volumes[i].Name == inject.VolumeJournal {
					p.Spec.Volumes[i].VolumeSource = corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp"}}
				}
			}
		}, refused, "volume actgate-journal"},
		{"token volume removed", base, func(p *corev1.Pod) {
			for i := range p.Spec.Volumes {
				if p.Spec.Volumes[i].Name == inject.VolumeToken {
					p.Spec.Volumes = append(p.Spec.Volumes[:i], p.Spec.Volumes[i+1:]...)
					break
				}
			}
		}, refused, "volume actgate-token"},
		{"a pod never injected: its image and actgate labels are its owner's", plain, func(p *corev1.Pod) {
			p.Spec.Containers[0].Image = "other:1"
			p.Labels = map[string]string{inject.LabelInject: "false"}
		}, open, ""},
		{"a sidecar without a readable status is still guarded", func() *corev1.Pod {
			p := base.DeepCopy()
			p.Annotations[inject.AnnotationStatus] = "{not json"
			return p
		}(), func(p *corev1.Pod) { sidecarOf(p).Image = "evil:1" }, refused, "init container actgate-sidecar image"},
		{"a status cannot claim the pod's own containers", func() *corev1.Pod {
			p := base.DeepCopy()
			p.Annotations[inject.AnnotationStatus] = `{"version":"v1","initContainers":["actgate-sidecar"],"containers":["agent"],"volumes":["creds"]}`
			return p
		}(), func(p *corev1.Pod) { p.Spec.Containers[0].Image = "agent:2" }, open, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := tc.old.DeepCopy()
			tc.mutate(pod)
			wants := []bool{tc.want.agent, tc.want.admin, tc.want.anonymous, tc.want.actgate}
			for i, user := range users {
				d := DecidePodUpdate(tc.old, pod, user, []string{guardActgate})
				if d.Allowed != wants[i] {
					t.Errorf("user %q: allowed = %v (%s), want %v", user, d.Allowed, d.Reason, wants[i])
				}
				if tc.changes == "" {
					if len(d.Changes) != 0 {
						t.Errorf("user %q: changes %v, want none", user, d.Changes)
					}
					continue
				}
				if len(d.Changes) == 0 || !strings.Contains(d.Changes[0], tc.changes) {
					t.Errorf("user %q: changes %v, want the first to contain %q", user, d.Changes, tc.changes)
				}
				if !d.Allowed && (!strings.Contains(d.Reason, tc.changes) || !strings.Contains(d.Reason, ErrInjectedPartChanged.Error())) {
					t.Errorf("user %q: reason %q", user, d.Reason)
				}
			}
		})
	}
}

// Nobody configured: nobody may change injected parts; a group never counts.
func TestDecidePodUpdateNoActgateUsers(t *testing.T) {
	old := injectedPod(t)
	pod := old.DeepCopy()
	sidecarOf(pod).Image = "evil:1"
	for _, actgate := range [][]string{nil, {}, {"system:serviceaccounts:actgate-system"}} {
		if d := DecidePodUpdate(old, pod, guardActgate, actgate); d.Allowed {
			t.Errorf("actgate users %v: the sidecar image change was allowed", actgate)
		}
	}
}

func TestDecidePodUpdateBoundsTheMessage(t *testing.T) {
	old := injectedPod(t)
	pod := old.DeepCopy()
	for i := range 20 {
		pod.Labels["actgate.io/"+strings.Repeat("k", i+1)] = "x"
	}
	d := DecidePodUpdate(old, pod, guardAgent, nil)
	if d.Allowed || len(d.Changes) != 20 || !strings.Contains(d.Reason, "and 17 more") || len(d.Reason) > 600 {
		t.Fatalf("%+v", d)
	}
}

func guardRequest(t *testing.T, sub, user string, pod, old *corev1.Pod) admission.Request {
	t.Helper()
	req := podRequest(t, admissionv1.Update, sub, pod, old)
	req.UserInfo = authenticationv1.UserInfo{Username: user}
	return req
}

func TestPodGuardHandle(t *testing.T) {
	g := &PodGuard{ActgateUsers: []string{guardActgate}, Log: logr.Discard()}
	old := injectedPod(t)
	swapped := old.DeepCopy()
	sidecarOf(swapped).Image = "evil:1"
	resized := old.DeepCopy()
	sidecarOf(resized).Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1m")}
	for _, tc := range []struct {
		name    string
		sub     string
		user    string
		pod     *corev1.Pod
		allowed bool
		audit   string
	}{
		{"image swap by the agent", "", guardAgent, swapped, false, "denied: init container actgate-sidecar image"},
		{"image swap by actgate", "", guardActgate, swapped, true, "actgate changed injected parts: init container actgate-sidecar image"},
		{"resize of the sidecar by the agent", "resize", guardAgent, resized, false, "denied: init container actgate-sidecar resources"},
		{"a plain update", "", guardAgent, old, true, ""},
		// The configuration never sends them; if it did, they are not this handler's.
		{"status subresource", "status", guardAgent, swapped, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := g.Handle(context.Background(), guardRequest(t, tc.sub, tc.user, tc.pod, old))
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed = %v (%v), want %v", resp.Allowed, resp.Result, tc.allowed)
			}
			if !tc.allowed && (resp.Result.Code != http.StatusForbidden || !strings.Contains(resp.Result.Message, ErrInjectedPartChanged.Error())) {
				t.Errorf("result %+v", resp.Result)
			}
			if got := resp.AuditAnnotations[AuditAnnotationDecision]; got != tc.audit && !strings.HasPrefix(got, tc.audit+";") {
				t.Errorf("audit %q, want %q", got, tc.audit)
			}
		})
	}

	t.Run("bad input", func(t *testing.T) {
		req := guardRequest(t, "", guardAgent, old, old)
		req.OldObject.Raw = []byte("{not json")
		if resp := g.Handle(context.Background(), req); resp.Allowed || resp.Result.Code != http.StatusBadRequest {
			t.Errorf("undecodable old pod: %+v", resp.Result)
		}
		req = guardRequest(t, "", guardAgent, old, old)
		req.Object.Raw = []byte("[]")
		if resp := g.Handle(context.Background(), req); resp.Allowed || resp.Result.Code != http.StatusBadRequest {
			t.Errorf("undecodable pod: %+v", resp.Result)
		}
		req = guardRequest(t, "", guardAgent, old, old)
		req.Kind = metav1.GroupVersionKind{Version: "v1", Kind: "Secret"}
		if resp := g.Handle(context.Background(), req); resp.Allowed {
			t.Errorf("another kind was allowed: %+v", resp.Result)
		}
	})
}

func namedPolicy(ns, name string, sel map[string]string) v1alpha1.ToolPolicy {
	p := toolPolicy(ns, sel)
	p.Name = name
	return *p
}

func TestGovernanceChange(t *testing.T) {
	old := injectedPod(t) // labels app=agent, namespace agents
	relabel := func(l map[string]string) *corev1.Pod {
		p := old.DeepCopy()
		p.Labels = l
		return p
	}
	payments := namedPolicy("agents", "payments", map[string]string{"app": "agent"})
	admin := namedPolicy("agents", "admin", map[string]string{"app": "admin"})
	elsewhere := namedPolicy("other", "admin", map[string]string{"app": "admin"})
	broken := namedPolicy("agents", "broken", nil)
	broken.Spec.PodSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Sometimes"}}
	for _, tc := range []struct {
		name     string
		pod      *corev1.Pod
		policies []v1alpha1.ToolPolicy
		want     string // "" = no change
		err      bool
	}{
		{"labels unchanged", old, []v1alpha1.ToolPolicy{payments, admin}, "", false},
		{"a label the selectors ignore", relabel(map[string]string{"app": "agent", "team": "billing"}), []v1alpha1.ToolPolicy{payments, admin}, "", false},
		{"into another policy", relabel(map[string]string{"app": "admin"}), []v1alpha1.ToolPolicy{payments, admin},
			"the ToolPolicies selecting it (agents/payments → agents/admin)", false},
		{"out of every policy", relabel(nil), []v1alpha1.ToolPolicy{payments, admin}, "(agents/payments → none)", false},
		{"a policy of another namespace does not count", relabel(map[string]string{"app": "admin", "x": "y"}), []v1alpha1.ToolPolicy{elsewhere}, "", false},
		{"a selector that does not parse", relabel(map[string]string{"app": "admin"}), []v1alpha1.ToolPolicy{payments, broken}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := GovernanceChange(old, tc.pod, tc.policies)
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("GovernanceChange = %q, want %q", got, tc.want)
			}
		})
	}
}

// The guard refuses a relabel that moves an injected pod to another ToolPolicy, unless actgate
// does it, and fails closed when the policies cannot be read.
func TestPodGuardRelabel(t *testing.T) {
	payments := namedPolicy("agents", "payments", map[string]string{"app": "agent"})
	admin := namedPolicy("agents", "admin", map[string]string{"app": "admin"})
	g := &PodGuard{Reader: reader(t, &payments, &admin), ActgateUsers: []string{guardActgate}, Log: logr.Discard()}
	old := injectedPod(t)
	moved := old.DeepCopy()
	moved.Labels = map[string]string{"app": "admin"}
	tagged := old.DeepCopy()
	tagged.Labels["team"] = "billing"
	if resp := g.Handle(context.Background(), guardRequest(t, "", guardAgent, moved, old)); resp.Allowed ||
		!strings.Contains(resp.Result.Message, "agents/payments → agents/admin") {
		t.Fatalf("relabel into another policy: %+v", resp.Result)
	}
	if resp := g.Handle(context.Background(), guardRequest(t, "", guardAgent, tagged, old)); !resp.Allowed {
		t.Fatalf("a label no selector reads: %+v", resp.Result)
	}
	if resp := g.Handle(context.Background(), guardRequest(t, "", guardActgate, moved, old)); !resp.Allowed {
		t.Fatalf("actgate's relabel: %+v", resp.Result)
	}
	plain := tokenPod("agents", "plain", map[string]string{"app": "agent"})
	plainMoved := plain.DeepCopy()
	plainMoved.Labels = map[string]string{"app": "admin"}
	if resp := g.Handle(context.Background(), guardRequest(t, "", guardAgent, plainMoved, plain)); !resp.Allowed {
		t.Fatalf("a pod never injected: %+v", resp.Result)
	}
	failing := &PodGuard{Reader: failingReader{}, Log: logr.Discard()}
	if resp := failing.Handle(context.Background(), guardRequest(t, "", guardAgent, tagged, old)); resp.Allowed || resp.Result.Code != http.StatusInternalServerError {
		t.Fatalf("policies unreadable: %+v", resp.Result)
	}
}

// failingReader fails every read.
type failingReader struct{ client.Reader }

func (failingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("the API server is unreachable")
}
