package kubectl_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/diag"
	"github.com/actgate/actgate/internal/kubectlplugin"
	"github.com/actgate/actgate/test/envtest"
	"github.com/actgate/actgate/test/testutil"
)

// TestDoctorOnTheAPIServer runs `kubectl actgate doctor` against a real API server holding what
// a new user meets: a ToolPolicy the manager did not accept, an injected pod whose sidecar calls
// an authority Service that does not exist (then one without endpoints, then a ready one of
// another version than the pod's sidecar image), and the sidecar's probe-failure Event naming
// its reasons. Each problem is a FAIL (or WARN) line with its code and fix, the exit status is
// 1 while any check fails; a user who may only view the namespace gets SKIP lines saying which
// read was refused instead of a false OK.
func TestDoctorOnTheAPIServer(t *testing.T) {
	env := envtest.Start(t) // its own API server: this test needs no plugin build
	ctx := context.Background()
	ns, cpNS := env.Namespace(t), env.Namespace(t)
	c := env.Client

	nsObj := &corev1.Namespace{}
	must(t, c.Get(ctx, client.ObjectKey{Name: ns}, nsObj))
	nsObj.Labels["actgate.io/inject"] = "true"
	must(t, c.Update(ctx, nsObj))

	tp := &v1alpha1.ToolPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "payments-policy"},
		Spec: v1alpha1.ToolPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "billing-agent"}},
			Servers:     []v1alpha1.ToolServer{{Name: "payments", URL: "http://payments.billing.svc:8080/mcp"}},
			Rules:       []v1alpha1.ToolRule{{Name: "all", Tools: []string{"*"}, Evidence: &v1alpha1.EvidenceRequirement{Role: v1alpha1.EvidenceRoleNone}}},
		},
	}
	must(t, c.Create(ctx, tp))
	now := metav1.Now()
	tp.Status.Conditions = []metav1.Condition{
		{Type: v1alpha1.ToolPolicyAcceptedCondition, Status: metav1.ConditionFalse, Reason: v1alpha1.ToolPolicyInvalidCELReason,
			Message: "rules[0].arguments[0].expression: undeclared reference to 'amount'", LastTransitionTime: now, ObservedGeneration: tp.Generation},
		{Type: v1alpha1.ToolPolicyReadyCondition, Status: metav1.ConditionFalse, Reason: v1alpha1.ToolPolicyNotAcceptedReason,
			Message: "not accepted", LastTransitionTime: now, ObservedGeneration: tp.Generation},
	}
	must(t, c.Status().Update(ctx, tp))

	must(t, c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "billing-agent"}}))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "billing-agent-0", Labels: map[string]string{"app": "billing-agent"},
			Annotations: map[string]string{"actgate.io/status": `{"version":"v1","policies":["` + ns + `/payments-policy"],"servers":["payments"],` +
				`"initContainers":["actgate-sidecar"]}`}},
		Spec: corev1.PodSpec{
			ServiceAccountName: "billing-agent",
			InitContainers: []corev1.Container{{Name: "actgate-sidecar", Image: "ghcr.io/actgate/actgate:0.0.9", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
				Args: []string{"sidecar"}, Env: []corev1.EnvVar{{Name: "ACTGATE_AUTHORITY_URL", Value: "https://actgate-authority." + cpNS + ".svc:443"}}}},
			Containers: []corev1.Container{{Name: "agent", Image: "example.com/billing-agent:1"}},
		},
	}
	must(t, c.Create(ctx, pod))
	pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "actgate-sidecar", Image: pod.Spec.InitContainers[0].Image, Started: ptr.To(true), RestartCount: 0}}
	must(t, c.Status().Update(ctx, pod))
	// The kubelet's probe-failure Event: "Startup probe failed: " and what `actgate sidecar probe`
	// printed (diag.FormatProblem lines).
	probeOut := "Startup probe failed: " + diag.FormatProblem(diag.New(diag.NotYetReceived, "policy", "The sidecar has not received its pod's ToolPolicy")) + "\n" +
		diag.FormatProblem(diag.New(diag.AuthorityUnreachable, "authority", "the last request to the authority service failed: dial tcp: connection refused")) + "\n" +
		diag.FormatProblem(diag.New(diag.UpstreamUnreachable, "payments", `upstream "payments": no connection to payments.billing.svc:8080`))
	must(t, c.Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: ns, Name: "billing-agent-0.probe"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod.Name, UID: pod.UID, FieldPath: "spec.initContainers{actgate-sidecar}"},
		Reason:         "Unhealthy", Message: probeOut, Type: corev1.EventTypeWarning, LastTimestamp: now, FirstTimestamp: now,
		Source: corev1.EventSource{Component: "kubelet"},
	}))

	doctor := func(t *testing.T, kubeconfig string, args ...string) (int, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		status := kubectlplugin.Main(append([]string{"doctor", "-n", ns, "--kubeconfig", kubeconfig}, args...), kubectlplugin.Options{
			Streams: genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut}, Now: time.Now})
		t.Logf("kubectl actgate doctor %s (status %d):\n%s%s", strings.Join(args, " "), status, out.String(), errOut.String())
		return status, out.String()
	}
	expect := func(t *testing.T, out string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("doctor output lacks %q", w)
			}
		}
	}

	t.Run("the authority Service is missing", func(t *testing.T) {
		status, out := doctor(t, env.Kubeconfig, pod.Name)
		if status != kubectlplugin.ExitError {
			t.Errorf("status %d, want %d", status, kubectlplugin.ExitError)
		}
		expect(t, out,
			"OK    namespace "+ns,
			"FAIL  toolpolicy payments-policy", "not accepted (InvalidCEL): rules[0].arguments[0].expression",
			"OK    pod billing-agent-0",
			"FAIL  authority service", diag.AuthorityUnreachable+": Service "+cpNS+"/actgate-authority, which the sidecar calls, does not exist",
			"helm upgrade --install actgate charts/actgate -n "+cpNS,
			"OK    service account billing-agent",
			"FAIL  sidecar", diag.AuthorityUnreachable+": not ready (restarts 0)", "dial tcp: connection refused",
			"FAIL  upstream payments", diag.UpstreamUnreachable, "the sample's URL is a placeholder")
	})

	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: cpNS, Name: "actgate-authority", Labels: map[string]string{"app.kubernetes.io/version": "0.1.0"}},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443}}},
	}
	must(t, c.Create(ctx, svc))
	t.Run("the authority Service has no endpoint", func(t *testing.T) {
		_, out := doctor(t, env.Kubeconfig, pod.Name)
		expect(t, out, "FAIL  authority service", "has no ready endpoint", "kubectl -n "+cpNS+" logs deploy/actgate-authority",
			"WARN  sidecar version", "the sidecar is 0.0.9, the control plane 0.1.0", "kubectl delete pod billing-agent-0 -n "+ns)
	})

	must(t, c.Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: cpNS, Name: "actgate-authority-1", Labels: map[string]string{"kubernetes.io/service-name": "actgate-authority"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.7"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}))
	t.Run("the authority Service is ready", func(t *testing.T) {
		_, out := doctor(t, env.Kubeconfig)
		expect(t, out, "OK    authority service", "has 1 ready endpoint(s)", "FAIL  toolpolicy payments-policy")
		if strings.Contains(out, "FAIL  authority service") {
			t.Error("the authority service still fails")
		}
	})

	// The manager's injector configuration (the chart's ConfigMap) names the sidecar image it
	// gives new pods: after an upgrade to 0.2.0 this pod still runs 0.0.9.
	must(t, c.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: cpNS, Name: "actgate-webhook-config"},
		Data:       map[string]string{"webhook.yaml": "injection:\n  image: \"ghcr.io/actgate/actgate:0.2.0\"\n  port: 15080\n"},
	}))
	t.Run("the injector gives new pods another sidecar image", func(t *testing.T) {
		_, out := doctor(t, env.Kubeconfig, pod.Name)
		expect(t, out, "WARN  sidecar version", "the sidecar runs ghcr.io/actgate/actgate:0.0.9; the injector now gives new pods ghcr.io/actgate/actgate:0.2.0",
			"restart the pod so it gets the control plane's sidecar: kubectl delete pod billing-agent-0 -n "+ns)
	})

	t.Run("a viewer of the namespace only", func(t *testing.T) {
		u, err := env.AddUser("doctor-viewer")
		must(t, err)
		// What a namespace viewer reads: pods, service accounts, events; not the namespace
		// itself, not the ToolPolicies (the chart aggregates those into view; envtest has no
		// chart), nothing in the control plane's namespace.
		must(t, c.Create(ctx, &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "doctor-viewer"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods", "serviceaccounts", "events"}, Verbs: []string{"get", "list"}}},
		}))
		must(t, c.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "doctor-viewer"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "doctor-viewer"},
			Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: u.Name}},
		}))
		// The authorizer's RBAC cache takes the binding in a moment.
		testutil.Eventually(t, 30*time.Second, "the viewer may get the pod", func() error {
			return u.Client.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})
		})
		status, out := doctor(t, u.Kubeconfig, pod.Name)
		expect(t, out, "SKIP  namespace "+ns, "your RBAC does not permit get namespace", "SKIP  toolpolicies", "OK    pod billing-agent-0",
			"SKIP  authority service", "your RBAC does not permit get service actgate-authority in "+cpNS)
		if strings.Contains(out, "OK    authority service") || strings.Contains(out, "OK    toolpolicy") {
			t.Error("a check the user could not make reads OK")
		}
		if status != kubectlplugin.ExitError { // the sidecar's own problems are still readable, and fail
			t.Errorf("status %d, want %d", status, kubectlplugin.ExitError)
		}
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
