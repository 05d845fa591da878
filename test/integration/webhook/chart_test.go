package webhook_test

import (
	"bytes"
	"context"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/pem"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/controllers"
	"github.com/actgate/actgate/internal/notify"
	"github.com/actgate/actgate/internal/review/service"
	"github.com/actgate/actgate/test/envtest"
	"github.com/actgate/actgate/webhook"
)

var update = flag.Bool("update", false, "rewrite testdata/helm/*.yaml from the current `helm template` output")

const chartDir = "charts/actgate"

// templateCases are the value sets rendered against golden files in testdata/helm.
var templateCases = []struct {
	name string
	args []string
}{
	{"default", nil},
	{"cert-manager-principals", []string{
		"--set", "certManager.enabled=true",
		"--set", "rbac.principals[0].user=alice@example.com",
		"--set", "rbac.principals[0].namespaces={billing,ops}",
		"--set", "webhook.optOutNamespaces={sandbox}",
		"--set", "image.tag=v1.2.3",
	}},
	{"notifications", []string{
		"--set", "notifications.enabled=true",
		"--set", "notifications.webhook.existingSecret=actgate-notify",
		"--set", "notifications.webhook.headersKey=headers",
		"--set", "notifications.consoleURL=https://console.example/moments/{id}",
	}},
	{"notifications-email", []string{
		"--set", "notifications.enabled=true",
		"--set", "notifications.webhook.existingSecret=actgate-notify",
		"--set", "notifications.webhook.format=teams",
		"--set", "notifications.consoleURL=https://approve.example.com/",
		"--set", "notifications.email.enabled=true",
		"--set", "notifications.email.smtpAddr=smtp.corp.example:587",
		"--set", "notifications.email.from=actgate@corp.example",
		"--set", "notifications.email.authSecret=actgate-smtp",
		"--set", "notifications.email.caConfigMap=corp-ca",
		"--set", `notifications.email.recipients.oidc:bob@example\.com=bob@corp.example`,
		"--set", "notifications.email.stripPrefix=oidc:",
		"--set", "notifications.email.html=true",
	}},
	{"tracing", []string{
		"--set", "tracing.endpoint=http://otel-collector.observability.svc:4318/v1/traces",
		"--set", "tracing.sampleRatio=0.25",
	}},
	{"sidecar-metrics", []string{
		"--set", "sidecar.metrics.port=9100",
		"--set", "sidecar.metrics.podMonitor.enabled=true",
		"--set", "sidecar.metrics.podMonitor.labels.release=kube-prometheus-stack",
		"--set", "sidecar.metrics.podMonitor.interval=30s",
	}},
	{"upstream-ca", []string{"--set", "sidecar.upstreamCA.configMap=corp-ca-bundle", "--set", "sidecar.upstreamCA.key=ca.pem"}},
	{"sidecar-metrics-off", []string{"--set", "sidecar.metrics.enabled=false", "--set", "sidecar.metrics.podMonitor.enabled=true"}},
	{"approval", slices.Concat(approvalArgs, []string{
		"--set", "approval.ingress.enabled=true",
		"--set", "approval.ingress.className=nginx",
		"--set", "approval.ingress.tlsSecret=approve-tls",
		"--set", "approval.ingress.annotations.cert-manager\\.io/cluster-issuer=letsencrypt",
		"--set", "approval.httpRoute.enabled=true",
		"--set", "approval.httpRoute.parentRefs[0].name=public",
		"--set", "approval.httpRoute.parentRefs[0].namespace=gateways",
		"--set", "notifications.enabled=true",
		"--set", "notifications.webhook.existingSecret=actgate-notify",
	})},
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := envtest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// TestChartInSyncWithGenerated: the chart's CRDs and manager role are the files `make
// manifests` generates (copied by `make chart-crds`), byte for byte, and no stale copy is left.
// It reads files only, so it runs under -short too.
func TestChartInSyncWithGenerated(t *testing.T) {
	root := repoRoot(t)
	gen, err := filepath.Glob(filepath.Join(root, "config/crd/bases/*.yaml"))
	if err != nil || len(gen) == 0 {
		t.Fatalf("no generated CRDs: %v", err)
	}
	chart, err := filepath.Glob(filepath.Join(root, chartDir, "crds/*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	base := func(ps []string) []string {
		out := make([]string, len(ps))
		for i, p := range ps {
			out[i] = filepath.Base(p)
		}
		return out
	}
	if !slices.Equal(base(gen), base(chart)) {
		t.Fatalf("chart CRDs %v != config/crd/bases %v; run `make chart-crds`", base(chart), base(gen))
	}
	pairs := [][2]string{{"config/rbac/role.yaml", chartDir + "/files/manager-role.yaml"}}
	for _, g := range gen {
		pairs = append(pairs, [2]string{filepath.Join("config/crd/bases", filepath.Base(g)), filepath.Join(chartDir, "crds", filepath.Base(g))})
	}
	for _, p := range pairs {
		a, errA := os.ReadFile(filepath.Join(root, p[0]))
		b, errB := os.ReadFile(filepath.Join(root, p[1]))
		if errA != nil || errB != nil {
			t.Fatalf("%v %v", errA, errB)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs from %s; run `make chart-crds`", p[1], p[0])
		}
	}
}

// helm runs the built helm binary (no API server needed).
func helm(t *testing.T, args ...string) string {
	t.Helper()
	envtest.SkipIfShort(t)
	bin, err := envtest.BinDir(t.Context(), os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	cmd := exec.CommandContext(t.Context(), filepath.Join(bin, "helm"), args...)
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CACHE_HOME="+home, "XDG_CONFIG_HOME="+home, "XDG_DATA_HOME="+home,
		"HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

func TestHelmLint(t *testing.T) {
	for _, tc := range templateCases {
		t.Run(tc.name, func(t *testing.T) {
			out := helm(t, append([]string{"lint", "--strict", "--kube-version", "1.37.2", chartDir}, tc.args...)...)
			if !strings.Contains(out, "0 chart(s) failed") || strings.Contains(out, "[WARNING]") || strings.Contains(out, "[ERROR]") {
				t.Errorf("helm lint is not clean:\n%s", out)
			}
		})
	}
}

func renderChart(t *testing.T, args ...string) string {
	t.Helper()
	return helm(t, append([]string{"template", "actgate", chartDir, "--namespace", "actgate-system", "--kube-version", "1.37.2"}, args...)...)
}

// generatedKey matches the data of the signing-key Secret, which `helm template` generates
// afresh on every run.
var generatedKey = regexp.MustCompile(`(?m)^(  signing\.(key|crt)): [A-Za-z0-9+/=]+$`)

// normalize replaces generated key material so the golden file is stable.
func normalize(rendered string) string {
	return generatedKey.ReplaceAllString(rendered, "$1: <generated>")
}

// docs splits a multi-document YAML stream into its non-empty documents.
func docs(t *testing.T, stream string) [][]byte {
	t.Helper()
	var out [][]byte
	r := utilyaml.NewYAMLReader(bufioReader(stream))
	for {
		d, err := r.Read()
		if err != nil {
			break
		}
		var m map[string]any
		if err := yaml.Unmarshal(d, &m); err != nil {
			t.Fatalf("rendered YAML does not parse: %v\n%s", err, d)
		}
		if len(m) > 0 {
			out = append(out, d)
		}
	}
	return out
}

func kindOf(t *testing.T, doc []byte) string {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		t.Fatal(err)
	}
	return tm.Kind
}

func TestHelmTemplateGolden(t *testing.T) {
	root := repoRoot(t)
	for _, tc := range templateCases {
		t.Run(tc.name, func(t *testing.T) {
			raw := renderChart(t, tc.args...)
			got := normalize(raw)
			if tc.name == "default" && got == raw {
				t.Errorf("the default rendering has no generated signing key to normalise")
			}
			golden := filepath.Join(root, "test/integration/webhook/testdata/helm", tc.name+".yaml")
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if got != string(want) {
				t.Errorf("helm template differs from %s (run with -update if intended)", golden)
			}

			for _, d := range docs(t, raw) {
				switch kindOf(t, d) {
				case "ConfigMap":
					checkConfigMap(t, d)
				case "ClusterRole":
					checkAuthorityRole(t, d)
				case "Secret":
					checkSigningKey(t, d)
				case "Deployment":
					checkPodReadsItsVolumes(t, d)
				case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
					if strings.Contains(string(d), "failurePolicy: Ignore") || strings.Count(string(d), "failurePolicy: Fail") < 3 {
						t.Errorf("a webhook does not fail closed:\n%s", d)
					}
				}
			}
		})
	}
}

// checkWebhookConfig decodes the chart's webhook.yaml exactly as the manager will (strict) and
// checks that the release namespace is exempt.
// checkConfigMap checks the chart's ConfigMaps: the webhook configuration, and the e-mail
// notifier's recipients file, which must parse as the manager reads it.
func checkConfigMap(t *testing.T, doc []byte) {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := yaml.UnmarshalStrict(doc, cm); err != nil {
		t.Fatal(err)
	}
	if cm.Name == "actgate-notify-recipients" {
		if r, err := notify.ParseRecipients([]byte(cm.Data["recipients"])); err != nil || len(r) == 0 {
			t.Errorf("the chart's recipients file: %v, %d entries", err, len(r))
		}
		return
	}
	checkWebhookConfig(t, doc)
}

func checkWebhookConfig(t *testing.T, doc []byte) {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := yaml.UnmarshalStrict(doc, cm); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "webhook.yaml")
	if err := os.WriteFile(f, []byte(cm.Data["webhook.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := webhook.LoadConfig(f)
	if err != nil {
		t.Fatalf("the chart's webhook.yaml is not a valid webhook.Config: %v", err)
	}
	if !slices.Contains(cfg.Injection.ExemptNamespaces, cm.Namespace) || cfg.Certs.Namespace != cm.Namespace {
		t.Errorf("release namespace %s not exempt / not the certs namespace: %+v", cm.Namespace, cfg)
	}
	// The manager reads its certificate through the API: ready without the kubelet's sync.
	if cfg.Certs.Source != webhook.CertSourceSecret {
		t.Errorf("certs.source %q, want %q", cfg.Certs.Source, webhook.CertSourceSecret)
	}
}

// checkPodReadsItsVolumes: every Secret and ConfigMap file a chart pod mounts is readable by
// the pod's non-root user as the kubelet writes it (root-owned, group fsGroup, the volume's
// mode): by "other", or by the group when the pod has fsGroup equal to its group. A 0400 key
// in a pod without fsGroup fails here as it crash-loops on a node ("permission denied"). And a
// folder the process writes (the manager's certificate folder) is an emptyDir, writable under
// readOnlyRootFilesystem.
func checkPodReadsItsVolumes(t *testing.T, doc []byte) {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := yaml.UnmarshalStrict(doc, d); err != nil {
		t.Fatal(err)
	}
	spec := d.Spec.Template.Spec
	sc := spec.SecurityContext
	if sc == nil || sc.RunAsUser == nil || *sc.RunAsUser == 0 || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Fatalf("%s: not a non-root pod: %+v", d.Name, sc)
	}
	groupReads := sc.FSGroup != nil && sc.RunAsGroup != nil && *sc.FSGroup == *sc.RunAsGroup
	for _, v := range spec.Volumes {
		var mode *int32
		var items []corev1.KeyToPath
		switch {
		case v.Secret != nil:
			mode, items = v.Secret.DefaultMode, v.Secret.Items
		case v.ConfigMap != nil:
			mode, items = v.ConfigMap.DefaultMode, v.ConfigMap.Items
		default:
			continue
		}
		def := int32(0o644) // the API server's default
		if mode != nil {
			def = *mode
		}
		modes := []int32{def}
		for _, it := range items {
			if it.Mode != nil {
				modes = append(modes, *it.Mode)
			}
		}
		for _, m := range modes {
			if m&0o004 == 0 && (m&0o040 == 0 || !groupReads) {
				t.Errorf("%s: volume %s has mode %#o: unreadable by user %d (fsGroup %s, runAsGroup %s)",
					d.Name, v.Name, m, *sc.RunAsUser, optInt(sc.FSGroup), optInt(sc.RunAsGroup))
			}
		}
	}
	if d.Name == "actgate-manager" {
		i := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == "webhook-certs" })
		if i < 0 || spec.Volumes[i].EmptyDir == nil || spec.Volumes[i].EmptyDir.Medium != corev1.StorageMediumMemory {
			t.Errorf("the manager's webhook-certs volume is not an in-memory emptyDir it can write: %+v", spec.Volumes)
		}
	}
}

// checkAuthorityRole: the chart grants the authority service exactly the rules the service
// declares it needs (cluster-wide and per governed namespace), and the manager's namespace role
// is exactly controllers.ManagerNamespaceRules.
func checkAuthorityRole(t *testing.T, doc []byte) {
	t.Helper()
	role := &rbacv1.ClusterRole{}
	if err := yaml.UnmarshalStrict(doc, role); err != nil {
		t.Fatal(err)
	}
	want, ok := map[string][]rbacv1.PolicyRule{
		"actgate-authority-role":           service.PolicyRules(),
		controllers.AuthorityNamespaceRole: service.NamespacePolicyRules(),
		controllers.ManagerNamespaceRole:   controllers.ManagerNamespaceRules(),
	}[role.Name]
	if !ok {
		return
	}
	if !equality.Semantic.DeepEqual(role.Rules, want) {
		t.Errorf("%s rules differ from what the code declares (internal/review/service.PolicyRules, NamespacePolicyRules, controllers.ManagerNamespaceRules):\n chart %+v\n code  %+v", role.Name, role.Rules, want)
	}
}

// checkSigningKey: a generated signing key is one the authority accepts, and its certificate
// gives the manager the matching public key.
func checkSigningKey(t *testing.T, doc []byte) {
	t.Helper()
	s := &corev1.Secret{}
	if err := yaml.UnmarshalStrict(doc, s); err != nil {
		t.Fatal(err)
	}
	if s.Name != "actgate-authority-signing-key" {
		return
	}
	block, _ := pem.Decode(s.Data["signing.key"])
	if block == nil {
		t.Fatalf("signing.key is not PEM")
	}
	key, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil || key.Curve != elliptic.P256() {
		t.Fatalf("signing.key is not an ECDSA P-256 key: %v", err)
	}
	pub, err := webhook.PublicKeysPEM(s.Data["signing.crt"])
	if err != nil {
		t.Fatal(err)
	}
	want, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := pem.Decode([]byte(pub)); got == nil || !bytes.Equal(got.Bytes, want) {
		t.Errorf("signing.crt does not carry signing.key's public key")
	}
}

// TestChartWebhooksMatchKustomize: the chart renders the same webhooks (names, paths, rules,
// selectors, policies) as config/webhook, which `make manifests` generates from the markers.
func TestChartWebhooksMatchKustomize(t *testing.T) {
	envtest.SkipIfShort(t)
	bin, err := envtest.BinDir(t.Context(), os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), filepath.Join(bin, "kubectl"), "kustomize", "config/webhook")
	cmd.Dir = repoRoot(t)
	kust, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	type hook struct {
		Path                              string
		Rules                             []admissionregistrationv1.RuleWithOperations
		NamespaceSelector, ObjectSelector *metav1.LabelSelector
		FailurePolicy                     *admissionregistrationv1.FailurePolicyType
		SideEffects                       *admissionregistrationv1.SideEffectClass
		ReinvocationPolicy                *admissionregistrationv1.ReinvocationPolicyType
		TimeoutSeconds                    *int32
		AdmissionReviewVersions           []string
	}
	collect := func(stream string) map[string]hook {
		out := map[string]hook{}
		for _, d := range docs(t, stream) {
			switch kindOf(t, d) {
			case "MutatingWebhookConfiguration":
				c := &admissionregistrationv1.MutatingWebhookConfiguration{}
				if err := yaml.UnmarshalStrict(d, c); err != nil {
					t.Fatal(err)
				}
				for _, w := range c.Webhooks {
					out[c.Name+"/"+w.Name] = hook{*w.ClientConfig.Service.Path, w.Rules, w.NamespaceSelector, w.ObjectSelector, w.FailurePolicy, w.SideEffects, w.ReinvocationPolicy, w.TimeoutSeconds, w.AdmissionReviewVersions}
				}
			case "ValidatingWebhookConfiguration":
				c := &admissionregistrationv1.ValidatingWebhookConfiguration{}
				if err := yaml.UnmarshalStrict(d, c); err != nil {
					t.Fatal(err)
				}
				for _, w := range c.Webhooks {
					out[c.Name+"/"+w.Name] = hook{*w.ClientConfig.Service.Path, w.Rules, w.NamespaceSelector, w.ObjectSelector, w.FailurePolicy, w.SideEffects, nil, w.TimeoutSeconds, w.AdmissionReviewVersions}
				}
			}
		}
		return out
	}
	fromChart, fromKustomize := collect(renderChart(t)), collect(string(kust))
	if len(fromChart) != 8 || len(fromKustomize) != 8 {
		t.Fatalf("webhooks: chart %d, kustomize %d, want 8 each", len(fromChart), len(fromKustomize))
	}
	for name, k := range fromKustomize {
		c, ok := fromChart[name]
		if !ok {
			t.Errorf("the chart lacks webhook %s", name)
			continue
		}
		if !equality.Semantic.DeepEqual(c, k) {
			t.Errorf("webhook %s differs:\n chart     %+v\n kustomize %+v", name, c, k)
		}
	}
}

// TestHelmInstall installs the chart into a real API server (never --wait: nothing rolls out
// without a kubelet) and checks what the objects grant.
func TestHelmInstall(t *testing.T) {
	e := envtest.Start(t)
	ctx := t.Context()
	// The harness installed config/crd/bases; remove them so the chart's crds/ are what is
	// installed (CRD deletion is the API server's own work, unlike namespace deletion). First
	// wait until each resource's storage serves lists from its watch cache: a CRD deleted while
	// that cache is still initializing has its instance cleanup fail ("storage is
	// (re)initializing") and retried with a backoff that outlasts the wait below.
	waitFor(t, func() bool {
		cached := &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "0"}}
		return e.Client.List(ctx, &v1alpha1.ToolPolicyList{}, cached) == nil &&
			e.Client.List(ctx, &v1alpha1.ActList{}, cached) == nil &&
			e.Client.List(ctx, &v1alpha1.BindingMomentList{}, cached) == nil &&
			e.Client.List(ctx, &v1alpha1.ReceiptAnchorList{}, cached) == nil &&
			e.Client.List(ctx, &v1alpha1.BudgetLedgerList{}, cached) == nil
	}, "the custom resources' watch caches")
	for _, name := range []string{"toolpolicies.actgate.io", "acts.actgate.io", "bindingmoments.actgate.io", "receiptanchors.actgate.io", "budgetledgers.actgate.io"} {
		if err := e.Client.Delete(ctx, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool {
		list := &apiextensionsv1.CustomResourceDefinitionList{}
		return e.Client.List(ctx, list) == nil && len(list.Items) == 0
	}, "CRDs deleted")
	for _, ns := range []string{"billing", "ops"} {
		namespace(t, e, ns, nil)
	}

	args := []string{"install", "actgate", chartDir, "--namespace", "actgate-system", "--create-namespace",
		"--set", "rbac.principals[0].user=alice@example.com", "--set", "rbac.principals[0].namespaces={billing}"}
	e.Helm(t, args...)

	t.Run("CRDs from the chart are established", func(t *testing.T) {
		waitFor(t, func() bool {
			for _, name := range []string{"toolpolicies.actgate.io", "acts.actgate.io", "bindingmoments.actgate.io", "receiptanchors.actgate.io", "budgetledgers.actgate.io"} {
				crd := &apiextensionsv1.CustomResourceDefinition{}
				if e.Client.Get(ctx, client.ObjectKey{Name: name}, crd) != nil {
					return false
				}
				if !slices.ContainsFunc(crd.Status.Conditions, func(c apiextensionsv1.CustomResourceDefinitionCondition) bool {
					return c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
				}) {
					return false
				}
			}
			return true
		}, "CRDs established")
	})

	t.Run("objects exist and webhooks fail closed", func(t *testing.T) {
		out := e.Kubectl(t, "get", "deploy,svc,sa,cm,secret", "-n", "actgate-system", "-o", "name")
		for _, want := range []string{"deployment.apps/actgate-manager", "deployment.apps/actgate-authority",
			"service/actgate-webhook-service", "service/actgate-authority", "service/actgate-manager-metrics",
			"configmap/actgate-webhook-config", "secret/actgate-webhook-server-cert"} {
			if !strings.Contains(out, want) {
				t.Errorf("missing %s in:\n%s", want, out)
			}
		}
		fp := e.Kubectl(t, "get", "mutatingwebhookconfiguration,validatingwebhookconfiguration", "-o", "jsonpath={.items[*].webhooks[*].failurePolicy}")
		if f := strings.Fields(fp); len(f) != 8 || slices.ContainsFunc(f, func(s string) bool { return s != "Fail" }) {
			t.Errorf("failure policies %q, want eight Fail", fp)
		}
	})

	t.Run("least privilege", func(t *testing.T) {
		agent := "system:serviceaccount:billing:billing-agent"
		manager := "system:serviceaccount:actgate-system:actgate-manager"
		for _, tc := range []struct {
			as, verb, resource, ns string
			want                   string
		}{
			// The agent's service account gets nothing in actgate.io.
			{agent, "get", "toolpolicies.actgate.io", "billing", "no"},
			{agent, "delete", "toolpolicies.actgate.io", "billing", "no"},
			{agent, "create", "acts.actgate.io", "billing", "no"},
			{agent, "get", "bindingmoments.actgate.io", "billing", "no"},
			{agent, "patch", "bindingmoments.actgate.io", "billing", "no"},
			{agent, "update", "leases.coordination.k8s.io", "billing", "no"},
			// Nobody but the authority service (in governed namespaces) writes receipt anchors:
			// not the pod whose log it anchors, not the manager, not a principal.
			{agent, "create", "receiptanchors.actgate.io", "billing", "no"},
			{agent, "update", "receiptanchors.actgate.io --subresource=status", "billing", "no"},
			{manager, "update", "receiptanchors.actgate.io --subresource=status", "billing", "no"},
			{"alice@example.com", "delete", "receiptanchors.actgate.io", "billing", "no"},
			{"system:serviceaccount:actgate-system:actgate-authority", "update", "receiptanchors.actgate.io --subresource=status", "billing", "no"},
			// Budget ledgers alike: an agent (or its pod's author) cannot reset what it spent,
			// a principal or viewer reads them.
			{agent, "update", "budgetledgers.actgate.io --subresource=status", "billing", "no"},
			{agent, "delete", "budgetledgers.actgate.io", "billing", "no"},
			{agent, "get", "budgetledgers.actgate.io", "billing", "no"},
			{manager, "update", "budgetledgers.actgate.io --subresource=status", "billing", "no"},
			{"alice@example.com", "update", "budgetledgers.actgate.io --subresource=status", "billing", "no"},
			{"system:serviceaccount:actgate-system:actgate-authority", "update", "budgetledgers.actgate.io --subresource=status", "billing", "no"},
			// Principals resolve binding moments where they are bound, and only there.
			{"alice@example.com", "patch", "bindingmoments.actgate.io", "billing", "yes"},
			{"alice@example.com", "patch", "bindingmoments.actgate.io", "ops", "no"},
			{"alice@example.com", "patch", "bindingmoments.actgate.io --subresource=status", "billing", "no"},
			{"alice@example.com", "delete", "bindingmoments.actgate.io", "billing", "no"},
			// The manager updates its own webhook configurations and certificate Secret only.
			{manager, "update", "mutatingwebhookconfigurations/actgate-mutating-webhook-configuration", "", "yes"},
			{manager, "update", "mutatingwebhookconfigurations/someone-else", "", "no"},
			{manager, "update", "secrets/actgate-webhook-server-cert", "actgate-system", "yes"},
			{manager, "update", "secrets/actgate-webhook-server-cert", "billing", "no"},
			{manager, "create", "bindingmoments.actgate.io", "billing", "no"},
			{manager, "patch", "bindingmoments.actgate.io", "billing", "no"},
			// The authority service creates moments but cannot resolve them; it holds its
			// namespaced rights (moments, Leases, pods) only where the manager binds them, in
			// namespaces with a ToolPolicy (none here: no manager runs; test/attacks
			// TestChartRBACIsNamespaceScoped runs it).
			{"system:serviceaccount:actgate-system:actgate-authority", "create", "bindingmoments.actgate.io", "billing", "no"},
			{"system:serviceaccount:actgate-system:actgate-authority", "patch", "bindingmoments.actgate.io", "billing", "no"},
			{"system:serviceaccount:actgate-system:actgate-authority", "update", "leases.coordination.k8s.io", "billing", "no"},
			{"system:serviceaccount:actgate-system:actgate-authority", "get", "leases.coordination.k8s.io", "kube-system", "no"},
			{"system:serviceaccount:actgate-system:actgate-authority", "get", "pods", "billing", "no"},
			{"system:serviceaccount:actgate-system:actgate-authority", "list", "toolpolicies.actgate.io", "billing", "yes"},
			{"system:serviceaccount:actgate-system:actgate-authority", "get", "secrets", "actgate-system", "no"},
			// The manager reads Secrets and deletes Leases only where it binds its namespace
			// role, and may bind only the two namespace roles.
			{manager, "get", "secrets", "billing", "no"},
			{manager, "delete", "leases.coordination.k8s.io", "kube-system", "no"},
			{manager, "bind", "clusterroles/actgate-authority-namespace-role", "", "yes"},
			{manager, "bind", "clusterroles/cluster-admin", "", "no"},
			{manager, "delete", "rolebindings/actgate-manager", "billing", "yes"},
			{manager, "delete", "rolebindings/someone-elses", "kube-system", "no"},
		} {
			args := append([]string{"auth", "can-i", tc.verb}, strings.Fields(tc.resource)...)
			args = append(args, "--as", tc.as)
			if tc.ns != "" {
				args = append(args, "-n", tc.ns)
			}
			if strings.HasPrefix(tc.as, "system:serviceaccount:") {
				ns := strings.Split(tc.as, ":")[2]
				args = append(args, "--as-group", "system:serviceaccounts", "--as-group", "system:serviceaccounts:"+ns, "--as-group", "system:authenticated")
			}
			out, _, _ := run(t, e, "kubectl", args...) // can-i exits 1 for "no"
			if got := strings.TrimSpace(out); got != tc.want {
				t.Errorf("%s can-i %s %s -n %q = %q, want %q", tc.as, tc.verb, tc.resource, tc.ns, got, tc.want)
			}
		}
	})

	t.Run("upgrade with the same values changes nothing it should not", func(t *testing.T) {
		// The rotator fills the Secret; an upgrade must leave its data alone.
		s := &corev1.Secret{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: "actgate-system", Name: "actgate-webhook-server-cert"}, s); err != nil {
			t.Fatal(err)
		}
		s.Data = map[string][]byte{"tls.crt": []byte("written by the manager")}
		if err := e.Client.Update(ctx, s); err != nil {
			t.Fatal(err)
		}
		key := &corev1.Secret{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: "actgate-system", Name: "actgate-authority-signing-key"}, key); err != nil {
			t.Fatal(err)
		}
		e.Helm(t, append([]string{"upgrade"}, args[1:]...)...)
		again := &corev1.Secret{}
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(key), again); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(key.Data["signing.key"], again.Data["signing.key"]) || len(key.Data["signing.key"]) == 0 {
			t.Errorf("helm upgrade replaced the authority-signing key")
		}
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(s), s); err != nil {
			t.Fatal(err)
		}
		if string(s.Data["tls.crt"]) != "written by the manager" {
			t.Errorf("helm upgrade reset the certificate Secret: %v", s.Data)
		}
	})
}

// TestKustomizeDefaultApplies applies config/default with the real kubectl and checks the
// manager's webhook configuration in it.
func TestKustomizeDefaultApplies(t *testing.T) {
	e := envtest.Start(t)
	e.Kubectl(t, "apply", "-k", "config/default")
	cm := &corev1.ConfigMap{}
	if err := e.Client.Get(t.Context(), client.ObjectKey{Namespace: "actgate-system", Name: "actgate-webhook-config"}, cm); err != nil {
		t.Fatal(err)
	}
	doc, err := yaml.Marshal(cm)
	if err != nil {
		t.Fatal(err)
	}
	checkWebhookConfig(t, doc)
	for _, name := range []string{"actgate-authority-role", controllers.AuthorityNamespaceRole, controllers.ManagerNamespaceRole} {
		role := &rbacv1.ClusterRole{}
		if err := e.Client.Get(t.Context(), client.ObjectKey{Name: name}, role); err != nil {
			t.Fatal(err)
		}
		role.APIVersion, role.Kind = "rbac.authorization.k8s.io/v1", "ClusterRole"
		roleDoc, err := yaml.Marshal(role)
		if err != nil {
			t.Fatal(err)
		}
		checkAuthorityRole(t, roleDoc)
	}
	for _, name := range []string{"actgate-manager", "actgate-authority"} {
		if err := e.Client.Get(t.Context(), client.ObjectKey{Namespace: "actgate-system", Name: name}, &corev1.ServiceAccount{}); apierrors.IsNotFound(err) {
			t.Errorf("service account %s not created", name)
		}
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestChartViewerRolesLeaveBindingMomentsOut: with rbac.aggregateViewers (the default) the
// ToolPolicy and Act viewer roles join the built-in view role, and the BindingMoment viewer role
// does not: BindingMoments carry the raw arguments of escalated calls (spec.calls), for their
// principals and the authority service only.
func TestChartViewerRolesLeaveBindingMomentsOut(t *testing.T) {
	aggregated := map[string]bool{}
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(renderChart(t)), 4096)
	for {
		var role rbacv1.ClusterRole
		if err := dec.Decode(&role); err != nil {
			break
		}
		if role.Kind == "ClusterRole" && strings.HasSuffix(role.Name, "-viewer-role") {
			aggregated[role.Name] = role.Labels["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
		}
	}
	for name, want := range map[string]bool{
		"actgate-toolpolicy-viewer-role":    true,
		"actgate-act-viewer-role":           true,
		"actgate-bindingmoment-viewer-role": false,
		"actgate-receiptanchor-viewer-role": true,
		"actgate-budgetledger-viewer-role":  true,
	} {
		got, ok := aggregated[name]
		if !ok {
			t.Errorf("the chart renders no ClusterRole %s", name)
		} else if got != want {
			t.Errorf("%s aggregated into view = %v, want %v", name, got, want)
		}
	}
}

func optInt(p *int64) string {
	if p == nil {
		return "unset"
	}
	return strconv.FormatInt(*p, 10)
}
