package webhook_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/test/envtest"
	"github.com/actgate/actgate/webhook/inject"
)

const (
	paymentsURL = "https://payments-mcp.payments.svc.cluster.local/mcp"
	sidecarURL  = "http://127.0.0.1:15080/mcp/payments"
)

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// namespace creates a namespace with labels (name "" generates one) and returns its name.
func namespace(t *testing.T, e *envtest.Env, name string, labels map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if name == "" {
		ns.GenerateName = "test-"
	}
	if err := e.Client.Create(ctxFor(t), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace: %v", err)
	}
	return ns.Name
}

var governed = map[string]string{inject.LabelInject: "true"}

func paymentsPolicy(ns string) *v1alpha1.ToolPolicy {
	return &v1alpha1.ToolPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "payments", Namespace: ns},
		Spec: v1alpha1.ToolPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "billing-agent"}},
			Servers: []v1alpha1.ToolServer{{Name: "payments", URL: paymentsURL,
				CredentialsSecretRef: &v1alpha1.SecretKeyRef{Name: "payments-mcp", Key: "token"}}},
			Rules: []v1alpha1.ToolRule{{Name: "reads", Tools: []string{"get_*"}}},
		},
	}
}

func agentPod(ns, name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{
			ServiceAccountName: "default",
			Containers: []corev1.Container{{
				Name: "agent", Image: "registry.example/billing-agent:1",
				Env: []corev1.EnvVar{
					{Name: "PAYMENTS_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: "payments-mcp"}, Key: "token"}}},
					{Name: "MCP_SERVER_URL", Value: paymentsURL},
				},
			}},
		},
	}
}

func createPolicy(t *testing.T, e *envtest.Env, p *v1alpha1.ToolPolicy) {
	t.Helper()
	if err := e.Client.Create(ctxFor(t), p); err != nil {
		t.Fatalf("create ToolPolicy: %v", err)
	}
}

// stored reads a pod back from the API server.
func stored(t *testing.T, e *envtest.Env, ns, name string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{}
	if err := e.Client.Get(ctxFor(t), client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
		t.Fatal(err)
	}
	return p
}

func injected(p *corev1.Pod) bool {
	_, ok := p.Annotations[inject.AnnotationStatus]
	return ok || slices.ContainsFunc(p.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == inject.SidecarName })
}

func envValue(c corev1.Container, name string) (corev1.EnvVar, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e, true
		}
	}
	return corev1.EnvVar{}, false
}

// waitForEvent waits for an InjectionSkipped Event regarding name whose note contains reason.
func waitForEvent(t *testing.T, e *envtest.Env, ns, name string, reason inject.Reason) eventsv1.Event {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		list := &eventsv1.EventList{}
		if err := e.Client.List(ctxFor(t), list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, ev := range list.Items {
			if ev.Regarding.Name == name && ev.Reason == "InjectionSkipped" && strings.HasPrefix(ev.Note, string(reason)) {
				return ev
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no InjectionSkipped Event with reason %s regarding %s/%s; events: %+v", reason, ns, name, list.Items)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestWebhooks(t *testing.T) {
	e := startWebhookEnv(t)

	t.Run("governed namespace: sidecar injected, credential moved to it, URL rewritten", func(t *testing.T) {
		ns := namespace(t, e.Env, "", governed)
		createPolicy(t, e.Env, paymentsPolicy(ns))
		pod := agentPod(ns, "billing-agent", map[string]string{"app": "billing-agent"})
		cfg := e.Config.Injection
		pub, err := os.ReadFile(filepath.Join(e.Root, "webhook/testdata/authority-public-key.pem"))
		if err != nil {
			t.Fatal(err)
		}
		ca, err := os.ReadFile(e.Config.Authority.CAFile)
		if err != nil {
			t.Fatal(err)
		}
		cfg.AuthorityCA, cfg.AuthorityPublicKey = string(ca), string(pub)
		want, _, err := inject.Inject(pod, []v1alpha1.ToolPolicy{*paymentsPolicy(ns)}, &cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Client.Create(ctxFor(t), pod); err != nil {
			t.Fatal(err)
		}
		got := stored(t, e.Env, ns, "billing-agent")
		side := got.Spec.InitContainers[0]
		if side.Name != inject.SidecarName || side.RestartPolicy == nil || *side.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			t.Fatalf("first init container is %s (restartPolicy %v), want the native sidecar", side.Name, side.RestartPolicy)
		}
		if side.Image != e.Config.Injection.Image || !slices.Equal(side.Args, []string{"sidecar"}) {
			t.Errorf("sidecar runs %s %v", side.Image, side.Args)
		}
		agent := got.Spec.Containers[0]
		if _, ok := envValue(agent, "PAYMENTS_TOKEN"); ok {
			t.Errorf("the agent container still has the credential env var")
		}
		// Only the sidecar holds it: every reference is the injected init container's.
		for _, r := range inject.CredentialReferences(got, map[string]bool{"payments-mcp": true}) {
			if r.Container != side.Name {
				t.Errorf("stored pod: %v", r)
			}
		}
		if v, ok := envValue(side, "PAYMENTS_TOKEN"); !ok || v.ValueFrom == nil || v.ValueFrom.SecretKeyRef.Name != "payments-mcp" {
			t.Errorf("the sidecar did not get the credential env var: %+v", v)
		}
		if v, _ := envValue(agent, "MCP_SERVER_URL"); v.Value != sidecarURL {
			t.Errorf("MCP_SERVER_URL = %q, want %q", v.Value, sidecarURL)
		}
		if v, _ := envValue(agent, inject.ServerURLEnv("payments")); v.Value != sidecarURL {
			t.Errorf("%s = %q", inject.ServerURLEnv("payments"), v.Value)
		}
		var creds, token *corev1.Volume
		for i, v := range got.Spec.Volumes {
			switch v.Name {
			case inject.VolumeCredentials:
				creds = &got.Spec.Volumes[i]
			case inject.VolumeToken:
				token = &got.Spec.Volumes[i]
			}
		}
		if creds == nil || creds.Projected.Sources[0].Secret.Name != "payments-mcp" || creds.Projected.Sources[0].Secret.Items[0].Path != "payments/credential" {
			t.Errorf("credentials volume: %+v", creds)
		}
		if token == nil || token.Projected.Sources[0].ServiceAccountToken.Audience != inject.DefaultAuthorityAudience {
			t.Errorf("token volume: %+v", token)
		}
		for _, m := range agent.VolumeMounts {
			if m.Name == inject.VolumeCredentials || m.Name == inject.VolumeToken {
				t.Errorf("the agent mounts %s", m.Name)
			}
		}
		// The trust anchors are the sidecar's own environment (fixed at creation), not
		// annotations a pod patch could rewrite.
		if v, _ := envValue(side, "ACTGATE_AUTHORITY_PUBLIC_KEY"); v.Value != string(pub) {
			t.Errorf("ACTGATE_AUTHORITY_PUBLIC_KEY = %q", v.Value)
		}
		if v, _ := envValue(side, "ACTGATE_AUTHORITY_CA"); v.Value != string(ca) {
			t.Errorf("ACTGATE_AUTHORITY_CA = %q", v.Value)
		}
		if _, ok := got.Annotations[inject.AnnotationAuthorityPublicKey]; ok {
			t.Errorf("the pod carries %s", inject.AnnotationAuthorityPublicKey)
		}
		if v, _ := envValue(side, "ACTGATE_SERVER_URLS"); v.Value != "payments="+paymentsURL {
			t.Errorf("ACTGATE_SERVER_URLS = %q", v.Value)
		}
		if got.Annotations[inject.AnnotationStatus] != want.Annotations[inject.AnnotationStatus] {
			t.Errorf("status annotation differs from the pure injection:\n got %s\nwant %s", got.Annotations[inject.AnnotationStatus], want.Annotations[inject.AnnotationStatus])
		}
	})

	t.Run("unlabelled namespace: not injected", func(t *testing.T) {
		ns := namespace(t, e.Env, "", nil)
		createPolicy(t, e.Env, paymentsPolicy(ns))
		if err := e.Client.Create(ctxFor(t), agentPod(ns, "billing-agent", map[string]string{"app": "billing-agent"})); err != nil {
			t.Fatal(err)
		}
		if p := stored(t, e.Env, ns, "billing-agent"); injected(p) {
			t.Errorf("a pod in an unlabelled namespace was injected")
		}
	})

	t.Run("governed namespace, no policy selects the pod: skipped with an Event", func(t *testing.T) {
		ns := namespace(t, e.Env, "", governed)
		createPolicy(t, e.Env, paymentsPolicy(ns))
		pod := agentPod(ns, "reporter", map[string]string{"app": "reporter"})
		pod.Spec.Containers[0].Env = nil // holds no credential
		if err := e.Client.Create(ctxFor(t), pod); err != nil {
			t.Fatal(err)
		}
		if injected(stored(t, e.Env, ns, "reporter")) {
			t.Fatalf("an unselected pod was injected")
		}
		ev := waitForEvent(t, e.Env, ns, "reporter", inject.ReasonNoPolicy)
		if ev.Type != corev1.EventTypeNormal || ev.Regarding.Kind != "Pod" || ev.Action != "Inject" {
			t.Errorf("event %+v", ev)
		}
	})

	t.Run("governed namespace, unselected pod holding the credential: refused", func(t *testing.T) {
		ns := namespace(t, e.Env, "", governed)
		createPolicy(t, e.Env, paymentsPolicy(ns))
		err := e.Client.Create(ctxFor(t), agentPod(ns, "smuggler", map[string]string{"app": "smuggler"}))
		if !apierrors.IsForbidden(err) || !contains(err.Error(), "no ToolPolicy selects this pod", "payments-mcp") {
			t.Fatalf("create = %v, want a denial naming the credential Secret", err)
		}
	})

	t.Run("ungoverned namespace, pod opts in by label: injected", func(t *testing.T) {
		ns := namespace(t, e.Env, "", nil)
		createPolicy(t, e.Env, paymentsPolicy(ns))
		if err := e.Client.Create(ctxFor(t), agentPod(ns, "volunteer", map[string]string{"app": "billing-agent", inject.LabelInject: "true"})); err != nil {
			t.Fatal(err)
		}
		if !injected(stored(t, e.Env, ns, "volunteer")) {
			t.Errorf("a pod opting in was not injected")
		}
	})

	t.Run("governed namespace, pod opts out: ignored, with a warning", func(t *testing.T) {
		ns := namespace(t, e.Env, "", governed)
		createPolicy(t, e.Env, paymentsPolicy(ns))
		pod := agentPod(ns, "optout", map[string]string{"app": "billing-agent", inject.LabelInject: "false"})
		pod.APIVersion, pod.Kind = "v1", "Pod"
		file := writeYAML(t, pod)
		_, stderr, err := run(t, e.Env, "kubectl", "create", "-f", file)
		if err != nil {
			t.Fatalf("kubectl create: %v\n%s", err, stderr)
		}
		if !contains(stderr, "Warning:", "actgate.io/inject=false is ignored in namespace "+ns) {
			t.Errorf("kubectl showed no opt-out warning:\n%s", stderr)
		}
		if !injected(stored(t, e.Env, ns, "optout")) {
			t.Errorf("the opt-out was honoured in a namespace that does not allow it")
		}
	})

	t.Run("opt-out namespace, pod opts out: honoured, with an Event", func(t *testing.T) {
		ns := namespace(t, e.Env, optOutNamespace, governed)
		createPolicy(t, e.Env, paymentsPolicy(ns))
		if err := e.Client.Create(ctxFor(t), agentPod(ns, "debugging", map[string]string{"app": "billing-agent", inject.LabelInject: "false"})); err != nil {
			t.Fatal(err)
		}
		if injected(stored(t, e.Env, ns, "debugging")) {
			t.Errorf("the opt-out was not honoured in the opt-out namespace")
		}
		waitForEvent(t, e.Env, ns, "debugging", inject.ReasonPodOptedOut)
	})

	t.Run("exempt namespace: never sent to the webhook", func(t *testing.T) {
		pod := agentPod("kube-system", "system-agent", map[string]string{"app": "billing-agent", inject.LabelInject: "true"})
		pod.Spec.Containers[0].Env = nil
		if err := e.Client.Create(ctxFor(t), pod); err != nil {
			t.Fatal(err)
		}
		if injected(stored(t, e.Env, "kube-system", "system-agent")) {
			t.Errorf("a pod in kube-system was injected")
		}
	})

	t.Run("a pod the sidecar cannot govern is refused", func(t *testing.T) {
		ns := namespace(t, e.Env, "", governed)
		createPolicy(t, e.Env, paymentsPolicy(ns))
		pod := agentPod(ns, "hostnet", map[string]string{"app": "billing-agent"})
		pod.Spec.HostNetwork = true
		err := e.Client.Create(ctxFor(t), pod)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "hostNetwork") {
			t.Fatalf("create = %v, want a denial about hostNetwork", err)
		}
	})

	t.Run("ephemeral containers may not reach the sidecar or the credential", func(t *testing.T) {
		ns := namespace(t, e.Env, "", governed)
		createPolicy(t, e.Env, paymentsPolicy(ns))
		if err := e.Client.Create(ctxFor(t), agentPod(ns, "debugged", map[string]string{"app": "billing-agent"})); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name string
			ec   corev1.EphemeralContainer
			want string // "" = allowed
		}{
			{"targets the sidecar", corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "d1", Image: "busybox"}, TargetContainerName: inject.SidecarName}, "may not target actgate-sidecar"},
			{"mounts the credentials", corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "d2", Image: "busybox",
				VolumeMounts: []corev1.VolumeMount{{Name: inject.VolumeCredentials, MountPath: "/c"}}}}, "may not mount actgate-credentials"},
			{"reads the Secret", corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "d3", Image: "busybox",
				Env: []corev1.EnvVar{{Name: "T", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "payments-mcp"}, Key: "token"}}}}}}, "credential Secret payments-mcp"},
			{"an ordinary debug container", corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "d4", Image: "busybox"}, TargetContainerName: "agent"}, ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				p := stored(t, e.Env, ns, "debugged")
				p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, tc.ec)
				err := e.Client.SubResource("ephemeralcontainers").Update(ctxFor(t), p)
				if tc.want == "" {
					if err != nil {
						t.Fatalf("an ordinary debug container was refused: %v", err)
					}
					return
				}
				if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("update = %v, want a denial containing %q", err, tc.want)
				}
			})
		}
	})

	t.Run("ToolPolicy with bad CEL is refused with the reason", func(t *testing.T) {
		ns := namespace(t, e.Env, "", governed)
		p := paymentsPolicy(ns)
		p.Spec.Rules[0].Arguments = []v1alpha1.ArgumentConstraint{{Name: "cap", Expression: "args.amount <="}}
		err := e.Client.Create(ctxFor(t), p)
		if !apierrors.IsInvalid(err) || !contains(err.Error(), "spec.rules[0].arguments[0].expression", "InvalidCEL", "args.amount <=") {
			t.Fatalf("create = %v, want 422 naming the expression and InvalidCEL", err)
		}
		p.Spec.Rules[0].Arguments[0].Expression = "args.amount" // not bool
		err = e.Client.Create(ctxFor(t), p)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "InvalidCEL") {
			t.Fatalf("create with a non-bool expression = %v, want InvalidCEL", err)
		}
		p.Spec.Rules[0].Arguments[0].Expression = "double(args.amount) <= 100.0"
		if err := e.Client.Create(ctxFor(t), p); err != nil {
			t.Fatalf("a valid expression was refused: %v", err)
		}
		// Updates are checked too.
		p.Spec.Rules[0].Arguments[0].Expression = "args.amount +"
		if err := e.Client.Update(ctxFor(t), p); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "InvalidCEL") {
			t.Fatalf("update to bad CEL = %v, want InvalidCEL", err)
		}
	})

	t.Run("ToolPolicy warnings: missing Secret, ungoverned namespace, shared server", func(t *testing.T) {
		ns := namespace(t, e.Env, "", nil)
		createPolicy(t, e.Env, paymentsPolicy(ns))
		p := paymentsPolicy(ns)
		p.Name = "payments-two"
		p.APIVersion, p.Kind = v1alpha1.GroupVersion.String(), "ToolPolicy"
		_, stderr, err := run(t, e.Env, "kubectl", "create", "-f", writeYAML(t, p))
		if err != nil {
			t.Fatalf("kubectl create: %v\n%s", err, stderr)
		}
		for _, want := range []string{
			"spec.servers[0].credentialsSecretRef: Secret payments-mcp not found in namespace " + ns,
			"namespace " + ns + " is not labelled actgate.io/inject=true",
			"ToolPolicy payments also lists server(s) payments",
		} {
			if !strings.Contains(stderr, want) {
				t.Errorf("no warning %q in:\n%s", want, stderr)
			}
		}
	})

	t.Run("BindingMoment resolution", func(t *testing.T) { testResolution(t, e.Env) })
	t.Run("BindingMoment creation", func(t *testing.T) { testMomentCreation(t, e.Env) })
	t.Run("BindingMoment resolution via", func(t *testing.T) { testResolutionVia(t, e.Env) })
	t.Run("namespace opt-out label is guarded", func(t *testing.T) { testNamespaceGuard(t, e.Env) })

	t.Run("every golden injection is a valid Pod", func(t *testing.T) {
		files, err := filepath.Glob(filepath.Join(e.Root, "testdata", "inject", "*.injected"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no golden files: %v", err)
		}
		for _, f := range files {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			pod := &corev1.Pod{}
			if err := yaml.UnmarshalStrict(raw, pod); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			namespace(t, e.Env, pod.Namespace, nil) // ungoverned: the API server's validation only
			if err := e.Client.Create(ctxFor(t), pod, client.DryRunAll); err != nil {
				t.Errorf("%s is not a valid Pod: %v", filepath.Base(f), err)
			}
		}
	})
}

func writeYAML(t *testing.T, obj any) string {
	t.Helper()
	b, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	// Not t.TempDir(): subtest names put commas in it, and kubectl -f splits on commas.
	dir, err := os.MkdirTemp("", "actgate-obj-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	f := filepath.Join(dir, "obj.yaml")
	if err := os.WriteFile(f, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// bind grants clusterRole to user in ns.
func bind(t *testing.T, e *envtest.Env, ns, clusterRole, user string) {
	t.Helper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "bind-", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}},
	}
	if err := e.Client.Create(ctxFor(t), rb); err != nil {
		t.Fatal(err)
	}
	// RBAC is evaluated from the API server's informer: wait until it applies.
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, _, _ := run(t, e, "kubectl", "auth", "can-i", "patch", "bindingmoments.actgate.io", "-n", ns, "--as", user)
		if strings.TrimSpace(out) == "yes" || clusterRole != principalRole || time.Now().After(deadline) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

const principalRole = "actgate-bindingmoment-principal-role"

// momentFixture creates the sample Act (agent: agent) and the sample BindingMoment addressed to
// principal, expiring at expires, under name.
func momentFixture(t *testing.T, e *envtest.Env, ns, name, agent, principal string, expires time.Time) *v1alpha1.BindingMoment {
	t.Helper()
	act := envtest.LoadSample[v1alpha1.Act](t, e.Root, "actgate_v1alpha1_act.yaml")
	act.Namespace, act.Name, act.Spec.Agent = ns, name, agent
	if err := e.Client.Create(ctxFor(t), act); err != nil {
		t.Fatal(err)
	}
	bm := envtest.LoadSample[v1alpha1.BindingMoment](t, e.Root, "actgate_v1alpha1_bindingmoment.yaml")
	bm.Namespace, bm.Name = ns, name
	bm.Spec.ActRef.Name, bm.Spec.Principal = name, principal
	bm.Spec.ExpiresAt = metav1.NewTime(expires.Truncate(time.Second))
	if err := e.Client.Create(ctxFor(t), bm); err != nil {
		t.Fatalf("create BindingMoment: %v", err)
	}
	return bm
}

func resolutionPatch(kind string, idx *int, digest string) string {
	r := map[string]any{"kind": kind, "envelopeDigest": digest}
	if idx != nil {
		r["optionIdx"] = *idx
	}
	b, _ := yaml.Marshal(r)
	j, _ := yaml.YAMLToJSON(b)
	return fmt.Sprintf(`{"spec":{"resolution":%s}}`, j)
}

func testResolution(t *testing.T, e *envtest.Env) {
	ns := namespace(t, e, "", nil)
	e.Kubectl(t, "apply", "-f", "config/rbac/bindingmoment_principal_role.yaml")
	agentName := "system:serviceaccount:" + ns + ":billing-agent"
	alice, err := e.AddUser("alice@example.com")
	if err != nil {
		t.Fatal(err)
	}
	bob, err := e.AddUser("bob@example.com")
	if err != nil {
		t.Fatal(err)
	}
	agent, err := e.AddUser(agentName, "system:serviceaccounts", "system:serviceaccounts:"+ns)
	if err != nil {
		t.Fatal(err)
	}
	bind(t, e, ns, principalRole, alice.Name)
	bind(t, e, ns, principalRole, bob.Name)

	bm := momentFixture(t, e, ns, "pay-2291", agentName, alice.Name, time.Now().Add(time.Hour))
	digest := string(bm.Spec.EnvelopeDigest)
	one, three := 1, 3
	patch := func(u *envtest.User, body string) error {
		return u.Client.Patch(ctxFor(t), &v1alpha1.BindingMoment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: bm.Name}},
			client.RawPatch("application/merge-patch+json", []byte(body)))
	}
	get := func() *v1alpha1.BindingMoment {
		got := &v1alpha1.BindingMoment{}
		if err := e.Client.Get(ctxFor(t), client.ObjectKeyFromObject(bm), got); err != nil {
			t.Fatal(err)
		}
		return got
	}

	t.Run("the agent's service account has no RBAC on binding moments", func(t *testing.T) {
		if err := patch(agent, resolutionPatch("option", &one, digest)); !apierrors.IsForbidden(err) || strings.Contains(err.Error(), "admission webhook") {
			t.Fatalf("patch by the agent = %v, want RBAC Forbidden", err)
		}
	})
	t.Run("the agent's service account, even if granted RBAC, is refused by admission", func(t *testing.T) {
		bind(t, e, ns, principalRole, agentName) // a misconfiguration admission must survive
		err := patch(agent, resolutionPatch("option", &one, digest))
		if !apierrors.IsForbidden(err) || !contains(err.Error(), "only the principal", agentName) {
			t.Fatalf("patch by the agent = %v, want the webhook's denial", err)
		}
	})
	t.Run("a user who is not the principal is refused", func(t *testing.T) {
		err := patch(bob, resolutionPatch("option", &one, digest))
		if !apierrors.IsForbidden(err) || !contains(err.Error(), "only the principal", "bob@example.com is not alice@example.com") {
			t.Fatalf("patch by bob = %v, want the webhook's denial", err)
		}
	})
	t.Run("a resolution naming another envelope is refused", func(t *testing.T) {
		other := "sha256:" + strings.Repeat("0", 64)
		if err := patch(alice, resolutionPatch("option", &one, other)); err == nil || !strings.Contains(err.Error(), "envelopeDigest") {
			t.Fatalf("patch with a wrong digest = %v, want a refusal", err)
		}
	})
	t.Run("an option index outside the envelope is refused (envelope-04 §7.3)", func(t *testing.T) {
		err := patch(alice, resolutionPatch("option", &three, digest))
		if !apierrors.IsForbidden(err) || !contains(err.Error(), "RES_", "option_idx") {
			t.Fatalf("patch with option 3 of 2 = %v, want the §7.3 refusal", err)
		}
	})
	if got := get(); got.Spec.Resolution != nil {
		t.Fatalf("a refused resolution was stored: %+v", got.Spec.Resolution)
	}
	t.Run("the principal resolves with kubectl, once", func(t *testing.T) {
		out, stderr, err := run(t, e, "kubectl", "--kubeconfig", alice.Kubeconfig, "-n", ns, "patch", "bm", bm.Name,
			"--type", "merge", "-p", resolutionPatch("option", &one, digest))
		if err != nil {
			t.Fatalf("kubectl patch as alice: %v\n%s%s", err, out, stderr)
		}
		got := get()
		if r := got.Spec.Resolution; r == nil || r.Kind != v1alpha1.ResolutionOption || r.OptionIdx == nil || *r.OptionIdx != 1 {
			t.Fatalf("stored resolution %+v", got.Spec.Resolution)
		}
		_, stderr, err = run(t, e, "kubectl", "--kubeconfig", alice.Kubeconfig, "-n", ns, "patch", "bm", bm.Name,
			"--type", "merge", "-p", resolutionPatch("declined", nil, digest))
		if err == nil || !strings.Contains(stderr, "resolution") {
			t.Fatalf("a second resolution was accepted: %v %s", err, stderr)
		}
		if r := get().Spec.Resolution; r.Kind != v1alpha1.ResolutionOption {
			t.Errorf("the first resolution was replaced by %s", r.Kind)
		}
	})
	t.Run("status.resolvedBy can only be the principal", func(t *testing.T) {
		got := get()
		got.Status.ResolvedBy = bob.Name
		if err := e.Client.Status().Update(ctxFor(t), got); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "resolvedBy") {
			t.Fatalf("status resolvedBy=bob = %v, want a denial", err)
		}
		got.Status.ResolvedBy, got.Status.State = alice.Name, v1alpha1.BindingMomentResolved
		if err := e.Client.Status().Update(ctxFor(t), got); err != nil {
			t.Fatalf("status resolvedBy=alice: %v", err)
		}
	})
	t.Run("an expired moment cannot be resolved", func(t *testing.T) {
		late := momentFixture(t, e, ns, "pay-late", agentName, alice.Name, time.Now().Add(-time.Minute))
		err := alice.Client.Patch(ctxFor(t), late, client.RawPatch("application/merge-patch+json", []byte(resolutionPatch("declined", nil, digest))))
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "expired") {
			t.Fatalf("resolving an expired moment = %v, want a denial", err)
		}
	})
}

func testMomentCreation(t *testing.T, e *envtest.Env) {
	ns := namespace(t, e, "", nil)
	sample := envtest.LoadSample[v1alpha1.BindingMoment](t, e.Root, "actgate_v1alpha1_bindingmoment.yaml")
	act := envtest.LoadSample[v1alpha1.Act](t, e.Root, "actgate_v1alpha1_act.yaml")
	act.Namespace, act.Spec.Agent = ns, "system:serviceaccount:agents:billing-agent"
	if err := e.Client.Create(ctxFor(t), act); err != nil {
		t.Fatal(err)
	}
	zero := int32(0)
	for i, tc := range []struct {
		name   string
		mutate func(*v1alpha1.BindingMoment)
		want   string // "" = admitted
	}{
		{"the sample is admitted", func(*v1alpha1.BindingMoment) {}, ""},
		{"principal is a service account of the namespace", func(b *v1alpha1.BindingMoment) {
			b.Spec.Principal = "system:serviceaccount:" + ns + ":helper"
		}, "is a service account of namespace"},
		{"principal is the act's agent", func(b *v1alpha1.BindingMoment) { b.Spec.Principal = act.Spec.Agent }, "is the agent that initiated Act"},
		{"no such act", func(b *v1alpha1.BindingMoment) { b.Spec.ActRef.Name = "no-such-act" }, "does not exist"},
		{"envelope not canonical", func(b *v1alpha1.BindingMoment) { b.Spec.Envelope = " " + b.Spec.Envelope }, "canonical form"},
		{"digest of another envelope", func(b *v1alpha1.BindingMoment) {
			b.Spec.EnvelopeDigest = "sha256:" + v1alpha1.Digest(strings.Repeat("a", 64))
		}, "envelope's digest is"},
		{"envelope not an envelope", func(b *v1alpha1.BindingMoment) { b.Spec.Envelope = `{"synopsis":"x"}` }, "ENV_MISSING_MEMBER"},
		{"synopsis differs from the envelope's", func(b *v1alpha1.BindingMoment) { b.Spec.Synopsis = "Send it now." }, "synopsis"},
		{"created already resolved", func(b *v1alpha1.BindingMoment) {
			b.Spec.Resolution = &v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionOption, OptionIdx: &zero, EnvelopeDigest: b.Spec.EnvelopeDigest}
		}, "created unresolved"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := sample.DeepCopy()
			b.Namespace, b.Name = ns, fmt.Sprintf("moment-%d", i)
			b.Spec.ExpiresAt = metav1.NewTime(time.Now().Add(time.Hour).Truncate(time.Second))
			tc.mutate(b)
			err := e.Client.Create(ctxFor(t), b)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("create = %v, want a denial containing %q", err, tc.want)
			}
		})
	}
}

func testNamespaceGuard(t *testing.T, e *envtest.Env) {
	editor := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "test-namespace-editor"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "create", "update", "patch"}}},
	}
	if err := e.Client.Create(ctxFor(t), editor); err != nil {
		t.Fatal(err)
	}
	dev, err := e.AddUser("dev@example.com", "developers")
	if err != nil {
		t.Fatal(err)
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "test-namespace-editor"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: editor.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: dev.Name}},
	}
	if err := e.Client.Create(ctxFor(t), crb); err != nil {
		t.Fatal(err)
	}
	gov := namespace(t, e, "", governed)
	plain := namespace(t, e, "", nil)
	label := func(u client.Client, ns string, value *string) error {
		v := "null"
		if value != nil {
			v = `"` + *value + `"`
		}
		return u.Patch(ctxFor(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"actgate.io/inject":`+v+`}}}`)))
	}
	// RBAC may take a moment to apply to the new binding.
	deadline := time.Now().Add(10 * time.Second)
	for label(dev.Client, plain, ptr.To("true")) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("dev cannot opt a namespace in: %v", label(dev.Client, plain, ptr.To("true")))
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, tc := range []struct {
		name  string
		value *string
	}{{"set false", ptr.To("false")}, {"set an invalid value", ptr.To("no")}, {"remove true", nil}} {
		t.Run("a developer may not "+tc.name, func(t *testing.T) {
			err := label(dev.Client, gov, tc.value)
			if !apierrors.IsForbidden(err) || !contains(err.Error(), "only namespace admins", "dev@example.com") {
				t.Fatalf("label change by dev = %v, want the guard's denial", err)
			}
		})
	}
	t.Run("a developer may not create an opted-out namespace", func(t *testing.T) {
		err := dev.Client.Create(ctxFor(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-", Labels: map[string]string{inject.LabelInject: "false"}}})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "only namespace admins") {
			t.Fatalf("create = %v, want the guard's denial", err)
		}
	})
	t.Run("an admin may take a namespace out", func(t *testing.T) {
		if err := label(e.Client, gov, ptr.To("false")); err != nil {
			t.Fatalf("admin (system:masters): %v", err)
		}
	})
}
