package webhook_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/actgate/actgate/test/envtest"
)

// approvalArgs turn the approval service on with every required value (and the optional CA
// and client secret).
var approvalArgs = []string{
	"--set", "approval.enabled=true",
	"--set", "approval.externalURL=https://approve.example.com",
	"--set", "approval.oidc.issuer=https://idp.example.com/realms/corp",
	"--set", "approval.oidc.clientID=actgate-approval",
	"--set", "approval.oidc.existingSecret=actgate-oidc",
	"--set", "approval.oidc.caConfigMap=corp-ca",
	"--set", "approval.namespaces={billing,ops}",
}

// renderedObject is one document of a rendering with its kind and name.
type renderedObject struct {
	kind, name string
	doc        []byte
}

func renderedObjects(t *testing.T, args ...string) []renderedObject {
	t.Helper()
	var out []renderedObject
	for _, d := range docs(t, renderChart(t, args...)) {
		var m metav1.PartialObjectMetadata
		if err := yaml.Unmarshal(d, &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, renderedObject{kind: m.Kind, name: m.Name, doc: d})
	}
	return out
}

func findObject(objs []renderedObject, kind, name string) []byte {
	for _, o := range objs {
		if o.kind == kind && o.name == name {
			return o.doc
		}
	}
	return nil
}

func managerArgs(t *testing.T, objs []renderedObject) []string {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := yaml.UnmarshalStrict(findObject(objs, "Deployment", "actgate-manager"), d); err != nil {
		t.Fatal(err)
	}
	return d.Spec.Template.Spec.Containers[0].Args
}

func hasArgPrefix(args []string, prefix string) bool {
	return slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, prefix) })
}

// TestChartApprovalOffByDefault: the default values render no approval object, and the manager
// gets no --console-url.
func TestChartApprovalOffByDefault(t *testing.T) {
	objs := renderedObjects(t)
	for _, o := range objs {
		if strings.Contains(o.name, "approval") || strings.Contains(string(o.doc), "component: approval") {
			t.Errorf("default values render %s %s", o.kind, o.name)
		}
	}
	if args := managerArgs(t, objs); hasArgPrefix(args, "--console-url") {
		t.Errorf("default manager args carry a console URL: %v", args)
	}
}

// TestChartApprovalEnabled: the approval Deployment runs `actgate-controlplane approval` with
// the flags of the values, as a non-root pod with a read-only root file system, no
// capabilities and the RuntimeDefault seccomp profile, probed on /healthz and /readyz; its
// ServiceAccount is bound to nothing (no RoleBinding or ClusterRoleBinding names it), so it
// has no access to actgate.io; announcements link to its external URL.
func TestChartApprovalEnabled(t *testing.T) {
	objs := renderedObjects(t, slices.Concat(approvalArgs, []string{
		"--set", "notifications.enabled=true", "--set", "notifications.webhook.existingSecret=actgate-notify",
	})...)
	if findObject(objs, "ServiceAccount", "actgate-approval") == nil || findObject(objs, "Service", "actgate-approval") == nil {
		t.Fatal("no approval ServiceAccount or Service")
	}
	if findObject(objs, "Ingress", "actgate-approval") != nil || findObject(objs, "HTTPRoute", "actgate-approval") != nil {
		t.Error("an Ingress or HTTPRoute rendered without being asked for")
	}
	d := &appsv1.Deployment{}
	if err := yaml.UnmarshalStrict(findObject(objs, "Deployment", "actgate-approval"), d); err != nil {
		t.Fatalf("approval Deployment: %v", err)
	}
	spec := d.Spec.Template.Spec
	if spec.ServiceAccountName != "actgate-approval" || len(spec.Containers) != 1 {
		t.Fatalf("service account %q, %d containers", spec.ServiceAccountName, len(spec.Containers))
	}
	c := spec.Containers[0]
	if !slices.Equal(c.Command, []string{"/usr/local/bin/actgate-controlplane"}) {
		t.Errorf("command %v", c.Command)
	}
	want := []string{
		"approval",
		"--listen=:8080",
		"--external-url=https://approve.example.com",
		"--oidc-issuer=https://idp.example.com/realms/corp",
		"--oidc-client-id=actgate-approval",
		"--oidc-client-secret-file=/var/run/actgate/oidc/client-secret",
		"--oidc-ca-file=/etc/actgate/oidc-ca/ca.crt",
		"--namespaces=billing,ops",
		"--session-lifetime=15m",
		"--step-up-max-age=5m",
		"--step-up-classes=FINANCIAL,PHYSICAL,NETWORK_CONTROL",
	}
	if !slices.Equal(c.Args, want) {
		t.Errorf("approval args\n got %q\nwant %q", c.Args, want)
	}
	// The files the flags name are mounted from the named Secret and ConfigMap.
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
		if !m.ReadOnly {
			t.Errorf("mount %s is writable", m.Name)
		}
	}
	vols := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		vols[v.Name] = v
	}
	if v := vols["oidc-client"]; mounts["oidc-client"] != "/var/run/actgate/oidc" || v.Secret == nil || v.Secret.SecretName != "actgate-oidc" ||
		len(v.Secret.Items) != 1 || v.Secret.Items[0].Key != "client-secret" {
		t.Errorf("client secret volume %+v at %q", v, mounts["oidc-client"])
	}
	if v := vols["oidc-ca"]; mounts["oidc-ca"] != "/etc/actgate/oidc-ca" || v.ConfigMap == nil || v.ConfigMap.Name != "corp-ca" {
		t.Errorf("CA volume %+v at %q", v, mounts["oidc-ca"])
	}
	// Pod security as the other deployments.
	psc, sc := spec.SecurityContext, c.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context %+v", psc)
	}
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 || sc.Privileged != nil && *sc.Privileged {
		t.Errorf("container security context %+v", sc)
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" ||
		c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("probes %+v %+v", c.LivenessProbe, c.ReadinessProbe)
	}
	// Bound to nothing: no binding of any kind names the approval service account.
	for _, o := range objs {
		var subjects []rbacv1.Subject
		switch o.kind {
		case "RoleBinding":
			b := &rbacv1.RoleBinding{}
			if err := yaml.UnmarshalStrict(o.doc, b); err != nil {
				t.Fatal(err)
			}
			subjects = b.Subjects
		case "ClusterRoleBinding":
			b := &rbacv1.ClusterRoleBinding{}
			if err := yaml.UnmarshalStrict(o.doc, b); err != nil {
				t.Fatal(err)
			}
			subjects = b.Subjects
		}
		for _, s := range subjects {
			if s.Name == "actgate-approval" || strings.Contains(s.Name, "actgate-approval") ||
				s.Kind == "Group" && strings.HasPrefix(s.Name, "system:serviceaccounts") {
				t.Errorf("%s %s binds %+v", o.kind, o.name, s)
			}
		}
	}
	// Announcements link to the approval page.
	if args := managerArgs(t, objs); !slices.Contains(args, "--console-url=https://approve.example.com/") {
		t.Errorf("manager args lack the approval page as console URL: %v", args)
	}
	// An explicit notifications.consoleURL wins.
	objs = renderedObjects(t, slices.Concat(approvalArgs, []string{
		"--set", "notifications.enabled=true", "--set", "notifications.webhook.existingSecret=actgate-notify",
		"--set", "notifications.consoleURL=https://console.example/m/{id}",
	})...)
	if args := managerArgs(t, objs); !slices.Contains(args, "--console-url=https://console.example/m/{id}") || slices.Contains(args, "--console-url=https://approve.example.com/") {
		t.Errorf("manager args with notifications.consoleURL: %v", args)
	}
}

// TestChartApprovalExposure: an Ingress and an HTTPRoute render when asked for, to the approval
// Service, for the host of approval.externalURL unless another is given.
func TestChartApprovalExposure(t *testing.T) {
	objs := renderedObjects(t, slices.Concat(approvalArgs, []string{
		"--set", "approval.ingress.enabled=true", "--set", "approval.ingress.className=nginx",
		"--set", "approval.ingress.tlsSecret=approve-tls",
		"--set", "approval.ingress.annotations.cert-manager\\.io/cluster-issuer=letsencrypt",
	})...)
	ing := &networkingv1.Ingress{}
	if err := yaml.UnmarshalStrict(findObject(objs, "Ingress", "actgate-approval"), ing); err != nil {
		t.Fatalf("Ingress: %v", err)
	}
	if ing.Spec.IngressClassName == nil || *ing.Spec.IngressClassName != "nginx" || len(ing.Spec.TLS) != 1 || ing.Spec.TLS[0].SecretName != "approve-tls" ||
		!slices.Equal(ing.Spec.TLS[0].Hosts, []string{"approve.example.com"}) || len(ing.Spec.Rules) != 1 || ing.Spec.Rules[0].Host != "approve.example.com" ||
		ing.Annotations["cert-manager.io/cluster-issuer"] != "letsencrypt" {
		t.Errorf("Ingress %+v", ing)
	}
	if b := ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service; b == nil || b.Name != "actgate-approval" || b.Port.Name != "http" {
		t.Errorf("Ingress backend %+v", b)
	}
	if findObject(objs, "HTTPRoute", "actgate-approval") != nil {
		t.Error("an HTTPRoute rendered without being asked for")
	}

	objs = renderedObjects(t, slices.Concat(approvalArgs, []string{
		"--set", "approval.httpRoute.enabled=true",
		"--set", "approval.httpRoute.parentRefs[0].name=public", "--set", "approval.httpRoute.parentRefs[0].namespace=gateways",
	})...)
	var route struct {
		Spec struct {
			ParentRefs []map[string]string `json:"parentRefs"`
			Hostnames  []string            `json:"hostnames"`
			Rules      []struct {
				BackendRefs []struct {
					Name string `json:"name"`
					Port int    `json:"port"`
				} `json:"backendRefs"`
			} `json:"rules"`
		} `json:"spec"`
	}
	doc := findObject(objs, "HTTPRoute", "actgate-approval")
	if err := yaml.Unmarshal(doc, &route); err != nil || doc == nil {
		t.Fatalf("HTTPRoute: %v\n%s", err, doc)
	}
	if len(route.Spec.ParentRefs) != 1 || route.Spec.ParentRefs[0]["name"] != "public" || route.Spec.ParentRefs[0]["namespace"] != "gateways" ||
		!slices.Equal(route.Spec.Hostnames, []string{"approve.example.com"}) || len(route.Spec.Rules) != 1 ||
		len(route.Spec.Rules[0].BackendRefs) != 1 || route.Spec.Rules[0].BackendRefs[0].Name != "actgate-approval" || route.Spec.Rules[0].BackendRefs[0].Port != 80 {
		t.Errorf("HTTPRoute %+v", route.Spec)
	}
	if findObject(objs, "Ingress", "actgate-approval") != nil {
		t.Error("an Ingress rendered without being asked for")
	}
}

// TestChartApprovalRefusesIncompleteValues: enabling the service without an https external URL,
// an issuer or a client id, or an HTTPRoute without a Gateway, fails the rendering with a message
// naming the value.
func TestChartApprovalRefusesIncompleteValues(t *testing.T) {
	envtest.SkipIfShort(t)
	bin, err := envtest.BinDir(t.Context(), os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, want string
		args       []string
	}{
		{"no external URL", "approval.externalURL", []string{"--set", "approval.externalURL="}},
		{"http external URL", "must be https://", []string{"--set", "approval.externalURL=http://approve.example.com"}},
		{"no issuer", "approval.oidc.issuer", []string{"--set", "approval.oidc.issuer="}},
		{"no client id", "approval.oidc.clientID", []string{"--set", "approval.oidc.clientID="}},
		{"route without gateway", "parentRefs", []string{"--set", "approval.httpRoute.enabled=true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			args := slices.Concat([]string{"template", "actgate", chartDir, "--namespace", "actgate-system", "--kube-version", "1.37.2"}, approvalArgs, tc.args)
			cmd := exec.CommandContext(t.Context(), filepath.Join(bin, "helm"), args...)
			cmd.Dir = repoRoot(t)
			cmd.Env = append(os.Environ(), "HOME="+home, "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Run(); err == nil || !strings.Contains(out.String(), tc.want) {
				t.Errorf("helm template: %v, want a failure naming %q:\n%.400s", err, tc.want, out.String())
			}
		})
	}
}
