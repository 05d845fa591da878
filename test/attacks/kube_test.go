package attacks

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/test/envtest"
	"github.com/actgate/actgate/test/testutil/webhookenv"
	"github.com/actgate/actgate/webhook"
	"github.com/actgate/actgate/webhook/inject"
)

// The Kubernetes rows run against one API server (envtest) with actgate's CRDs, its webhook
// configurations from `kubectl kustomize config/webhook`, and a manager serving actgate's
// webhooks (test/testutil/webhookenv, as test/integration/webhook runs them). Users authenticate
// with client certificates (envtest.AddUser); what they may do is real RBAC.

// cluster is the shared control plane, started by the first Kubernetes row and stopped by
// TestMain.
var cluster struct {
	once sync.Once
	env  *envtest.Env
	stop func()
	err  error
}

// kube returns the shared control plane with the webhooks served, skipping t under -short.
func kube(t *testing.T) *envtest.Env {
	t.Helper()
	envtest.SkipIfShort(t)
	cluster.once.Do(func() { cluster.env, cluster.stop, cluster.err = startCluster() })
	if cluster.err != nil {
		t.Fatalf("envtest with webhooks: %v", cluster.err)
	}
	return cluster.env
}

func startCluster() (*envtest.Env, func(), error) {
	ctx := context.Background()
	we, err := webhookenv.New(ctx, func(c *webhook.Config) { c.ActgateUsers = []string{actgateManager} })
	if err != nil {
		return nil, nil, err
	}
	env, root := we.Env, we.Root
	stop := func() { _ = we.Stop() }
	// The principal role exactly as config/rbac ships it.
	role := &rbacv1.ClusterRole{}
	raw, err := os.ReadFile(filepath.Join(root, "config/rbac/bindingmoment_principal_role.yaml"))
	if err == nil {
		err = yaml.UnmarshalStrict(raw, role)
	}
	if err == nil {
		err = env.Client.Create(ctx, role)
	}
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("principal role: %w", err)
	}
	return env, stop, nil
}

const principalRole = "actgate-bindingmoment-principal-role"

func kctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// namespace creates a namespace with labels and returns its name.
func namespace(t *testing.T, e *envtest.Env, labels map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "attack-", Labels: labels}}
	if err := e.Client.Create(kctx(t), ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return ns.Name
}

// serviceAccountUser provisions the identity the API server gives a pod's service account.
func serviceAccountUser(t *testing.T, e *envtest.Env, ns, name string) *envtest.User {
	t.Helper()
	u, err := e.AddUser("system:serviceaccount:"+ns+":"+name, "system:serviceaccounts", "system:serviceaccounts:"+ns)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// grant gives user the rules in ns (a Role and RoleBinding) or, with ns "", cluster-wide, and
// waits until RBAC applies them (verb on resource in group).
func grant(t *testing.T, e *envtest.Env, ns, user string, rules []rbacv1.PolicyRule) {
	t.Helper()
	ctx := kctx(t)
	name := fmt.Sprintf("attack-%d", time.Now().UnixNano())
	subj := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}
	var err error
	if ns == "" {
		if err = e.Client.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}); err == nil {
			err = e.Client.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}, Subjects: subj})
		}
	} else {
		if err = e.Client.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Rules: rules}); err == nil {
			err = e.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}, Subjects: subj})
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	waitCan(t, e, ns, user, rules[0].Verbs[0], rules[0].Resources[0], rules[0].APIGroups[0])
}

// bindPrincipal binds config/rbac's principal role to user in ns.
func bindPrincipal(t *testing.T, e *envtest.Env, ns, user string) {
	t.Helper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "principal-", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: principalRole},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if err := e.Client.Create(kctx(t), rb); err != nil {
		t.Fatal(err)
	}
	waitCan(t, e, ns, user, "patch", "bindingmoments", v1alpha1.GroupVersion.Group)
}

// waitCan waits until the API server's RBAC informer lets user do verb on resource.
func waitCan(t *testing.T, e *envtest.Env, ns, user, verb, resource, group string) {
	t.Helper()
	target := resource
	if group != "" {
		target = resource + "." + group
	}
	args := []string{"auth", "can-i", verb, target, "--as", user}
	if ns != "" {
		args = append(args, "-n", ns)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		out, _ := e.Command(ctx, "kubectl", args...).Output()
		cancel()
		if strings.TrimSpace(string(out)) == "yes" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("RBAC never let %s %s %s in %q", user, verb, target, ns)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// forbidden checks err is a 403 whose message contains every want.
func forbidden(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Fatalf("%s = %v, want 403 Forbidden", what, err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("%s = %v, want a refusal containing %q", what, err, w)
		}
	}
}

// momentFor creates the sample Act (initiated by agent) and the sample BindingMoment addressed
// to principal.
func momentFor(t *testing.T, e *envtest.Env, ns, agent, principal string) *v1alpha1.BindingMoment {
	t.Helper()
	a := envtest.LoadSample[v1alpha1.Act](t, e.Root, "actgate_v1alpha1_act.yaml")
	a.Namespace, a.Name, a.Spec.Agent = ns, "pay-1", agent
	if err := e.Client.Create(kctx(t), a); err != nil {
		t.Fatal(err)
	}
	bm := envtest.LoadSample[v1alpha1.BindingMoment](t, e.Root, "actgate_v1alpha1_bindingmoment.yaml")
	bm.Namespace, bm.Name = ns, "pay-1"
	bm.Spec.ActRef.Name, bm.Spec.Principal = a.Name, principal
	bm.Spec.ExpiresAt = metav1.NewTime(time.Now().Add(time.Hour).Truncate(time.Second))
	if err := e.Client.Create(kctx(t), bm); err != nil {
		t.Fatalf("create BindingMoment: %v", err)
	}
	return bm
}

// resolutionPatch is a merge patch writing spec.resolution: an option choice.
func resolutionPatch(idx int, digest string) client.Patch {
	return client.RawPatch("application/merge-patch+json",
		[]byte(fmt.Sprintf(`{"spec":{"resolution":{"kind":"option","optionIdx":%d,"envelopeDigest":%q}}}`, idx, digest)))
}

// governedPolicy is a ToolPolicy selecting app=billing-agent with a credential Secret.
func governedPolicy(ns string) *v1alpha1.ToolPolicy {
	return &v1alpha1.ToolPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "payments", Namespace: ns},
		Spec: v1alpha1.ToolPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "billing-agent"}},
			Servers: []v1alpha1.ToolServer{{Name: "payments", URL: "https://payments-mcp.payments.svc.cluster.local/mcp",
				CredentialsSecretRef: &v1alpha1.SecretKeyRef{Name: "payments-mcp", Key: "token"}}},
			Rules: []v1alpha1.ToolRule{{Name: "reads", Tools: []string{"get_*"}}},
		},
	}
}

// agentPod is a pod of the billing agent holding the credential, with extra labels and
// annotations.
func agentPod(ns, name string, labels, annotations map[string]string) *corev1.Pod {
	l := map[string]string{"app": "billing-agent"}
	for k, v := range labels {
		l[k] = v
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: l, Annotations: annotations},
		Spec: corev1.PodSpec{
			ServiceAccountName: "default",
			Containers: []corev1.Container{{
				Name: "agent", Image: "registry.example/billing-agent:1",
				Env: []corev1.EnvVar{{Name: "PAYMENTS_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "payments-mcp"}, Key: "token"}}}},
			}},
		},
	}
}

// sidecarInjected reports whether the stored pod runs the actgate sidecar and the agent
// container no longer holds the credential.
func sidecarInjected(p *corev1.Pod) bool {
	side := false
	for _, c := range p.Spec.InitContainers {
		side = side || c.Name == inject.SidecarName
	}
	for _, c := range p.Spec.Containers {
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == "payments-mcp" {
				return false
			}
		}
	}
	return side
}
