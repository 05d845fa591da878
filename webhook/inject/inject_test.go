package inject_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/webhook/inject"
)

func policy(name string, sel metav1.LabelSelector, servers ...v1alpha1.ToolServer) v1alpha1.ToolPolicy {
	return v1alpha1.ToolPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "agents"},
		Spec:       v1alpha1.ToolPolicySpec{PodSelector: sel, Servers: servers},
	}
}

func withSink(p v1alpha1.ToolPolicy, id string) v1alpha1.ToolPolicy {
	p.Spec.Sink = &v1alpha1.SinkIdentity{ID: id}
	return p
}

func server(name, secret string) v1alpha1.ToolServer {
	s := v1alpha1.ToolServer{Name: name, URL: "https://" + name + ".example/mcp"}
	if secret != "" {
		s.CredentialsSecretRef = &v1alpha1.SecretKeyRef{Name: secret, Key: "token"}
	}
	return s
}

func agentPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "agents", Labels: map[string]string{"app": "agent"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "agent", Image: "agent:1",
			Env: []corev1.EnvVar{{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "token"}}}},
		}}},
	}
}

func TestInjectRefusesWhatTheSidecarCannotGovern(t *testing.T) {
	cfg := goldenConfig(t)
	one := []v1alpha1.ToolPolicy{policy("p", metav1.LabelSelector{}, server("tools", "creds"))}
	for _, tc := range []struct {
		name     string
		mutate   func(*corev1.Pod)
		policies []v1alpha1.ToolPolicy
		want     error
		msg      string
	}{
		{"host network", func(p *corev1.Pod) { p.Spec.HostNetwork = true }, one, inject.ErrNotInjectable, "hostNetwork"},
		{"shared process namespace", func(p *corev1.Pod) { p.Spec.ShareProcessNamespace = ptr.To(true) }, one, inject.ErrNotInjectable, "shareProcessNamespace"},
		{"sidecar port in use", func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: inject.DefaultPort}}
		}, one, inject.ErrNotInjectable, "port 15080"},
		{"sidecar port in use by an init container", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "i", Ports: []corev1.ContainerPort{{ContainerPort: inject.DefaultPort}}}}
		}, one, inject.ErrNotInjectable, "container init"},
		// What the pod's author writes never decides what is trusted: a name the injector
		// reserves is refused, whatever container, volume or mount uses it.
		{"the agent mounts its own emptyDir named like the credentials volume", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: inject.VolumeCredentials, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: inject.VolumeCredentials, MountPath: "/c"}}
		}, one, inject.ErrNotInjectable, `container "agent" mounts volume "actgate-credentials"`},
		{"the agent mounts the token volume with a subPath, declaring no volume", func(p *corev1.Pod) {
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: inject.VolumeToken, MountPath: "/t", SubPath: "token"}}
		}, one, inject.ErrNotInjectable, `mounts volume "actgate-token"`},
		{"an init container mounts the journal volume", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: inject.VolumeJournal, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "i", VolumeMounts: []corev1.VolumeMount{{Name: inject.VolumeJournal, MountPath: "/j"}}}}
		}, one, inject.ErrNotInjectable, `init container "init" mounts volume "actgate-journal"`},
		{"a second container mounts a volume named actgate-…", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "actgate-cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "helper", Image: "h", VolumeMounts: []corev1.VolumeMount{{Name: "actgate-cache", MountPath: "/x"}}})
		}, one, inject.ErrNotInjectable, `container "helper" mounts volume "actgate-cache"`},
		{"a volume named actgate-… no container mounts", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "actgate-cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		}, one, inject.ErrNotInjectable, `volume "actgate-cache": names starting with "actgate-" are reserved`},
		{"the agent container is named like the sidecar", func(p *corev1.Pod) {
			p.Spec.Containers[0].Name = inject.SidecarName
		}, one, inject.ErrNotInjectable, `container "actgate-sidecar"`},
		{"an init container is named like the sidecar", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: inject.SidecarName, Image: "not-actgate", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}}
		}, one, inject.ErrNotInjectable, `init container "actgate-sidecar" that the actgate injector did not add`},
		{"a container named actgate-… the status does not list", func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "actgate-helper", Image: "h"})
		}, one, inject.ErrNotInjectable, `container "actgate-helper": names starting with "actgate-" are reserved`},
		{"an ephemeral container named actgate-…", func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "actgate-debug", Image: "d"}}}
		}, one, inject.ErrNotInjectable, `ephemeral container "actgate-debug"`},
		{"a forged status drops the author's own actgate-… container", func(p *corev1.Pod) {
			p.Annotations = map[string]string{inject.AnnotationStatus: `{"version":"v1","containers":["actgate-helper"]}`}
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "actgate-helper", Image: "h"})
		}, one, inject.ErrNotInjectable, `container "actgate-helper" that the actgate injector did not add`},
		{"a forged status alone", func(p *corev1.Pod) {
			p.Annotations = map[string]string{inject.AnnotationStatus: `{"version":"v1","policies":["agents/p"],"servers":["tools"]}`}
		}, one, inject.ErrNotInjectable, `carries the actgate.io/status annotation but not the init container "actgate-sidecar"`},
		{"an unreadable status", func(p *corev1.Pod) {
			p.Annotations = map[string]string{inject.AnnotationStatus: `{`}
		}, one, inject.ErrNotInjectable, "actgate.io/status"},
		{"a token projected for the authority's audience", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "id", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: inject.DefaultAuthorityAudience, Path: "t"}}}}}}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "id", MountPath: "/id"}}
		}, one, inject.ErrNotInjectable, `volume "id" projects a service-account token for audience "actgate-authority"`},
		{"a token projected for another audience is the pod's own", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "id", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "vault", Path: "t"}}}}}}}
		}, one, nil, ""},
		{"two policies list the same server", nil, []v1alpha1.ToolPolicy{
			policy("a", metav1.LabelSelector{}, server("tools", "")),
			policy("b", metav1.LabelSelector{}, server("tools", "")),
		}, inject.ErrPolicy, `server "tools" is listed by both agents/a and agents/b`},
		{"no policy", nil, nil, inject.ErrPolicy, "no ToolPolicy"},
		{"two policies name different sinks", nil, []v1alpha1.ToolPolicy{
			withSink(policy("a", metav1.LabelSelector{}, server("one", "")), "sink-a"),
			withSink(policy("b", metav1.LabelSelector{}, server("two", "")), "sink-b"),
		}, inject.ErrPolicy, `names sink "sink-a" and agents/b names "sink-b"`},
		{"two policies name the same sink", nil, []v1alpha1.ToolPolicy{
			withSink(policy("a", metav1.LabelSelector{}, server("one", "")), "sink-a"),
			withSink(policy("b", metav1.LabelSelector{}, server("two", "")), "sink-a"),
		}, nil, ""},
		{"a server URL with a comma", nil, []v1alpha1.ToolPolicy{policy("a", metav1.LabelSelector{},
			v1alpha1.ToolServer{Name: "odd", URL: "https://odd.example/mcp?a=1,2"})}, inject.ErrPolicy, "comma"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := agentPod()
			if tc.mutate != nil {
				tc.mutate(pod)
			}
			out, _, err := inject.Inject(pod, tc.policies, cfg)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Inject = %v, want %v containing %q", err, tc.want, tc.msg)
			}
			if out != nil {
				t.Errorf("a refused pod came back injected")
			}
		})
	}
}

func TestInjectDoesNotModifyItsInput(t *testing.T) {
	pod := agentPod()
	before := mustYAML(t, pod)
	if _, _, err := inject.Inject(pod, []v1alpha1.ToolPolicy{policy("p", metav1.LabelSelector{}, server("tools", "creds"))}, goldenConfig(t)); err != nil {
		t.Fatal(err)
	}
	if after := mustYAML(t, pod); after != before {
		t.Errorf("Inject changed its input:\n%s", lineDiff(before, after))
	}
}

// The invariant the whole package exists for: after injection no container but the sidecar
// refers to a credential Secret, and the sidecar has the credential.
func TestInjectedAgentsHoldNoCredential(t *testing.T) {
	for _, in := range goldenInputs(t) {
		pod, policies := readCase(t, in)
		selected, err := inject.Select(pod, policies)
		if err != nil {
			t.Fatal(err)
		}
		out, st, err := inject.Inject(pod, selected, goldenConfig(t))
		if err != nil {
			t.Fatal(err)
		}
		// Only the containers this injection added (its returned Status) may hold them.
		for _, r := range inject.CredentialReferences(out, inject.CredentialSecrets(selected)) {
			if !slices.Contains(st.InitContainers, r.Container) && !slices.Contains(st.Containers, r.Container) {
				t.Errorf("%s: agent container still refers to a credential: %v", in, r)
			}
		}
		if out.Spec.InitContainers[0].Name != inject.SidecarName || out.Spec.InitContainers[0].RestartPolicy == nil ||
			*out.Spec.InitContainers[0].RestartPolicy != corev1.ContainerRestartPolicyAlways {
			t.Errorf("%s: the first init container is not the native sidecar", in)
		}
		if got, ok := inject.StatusOf(out); !ok || got.Version != inject.StatusVersion || len(got.Servers) != len(st.Servers) {
			t.Errorf("%s: status annotation %v %v", in, got, ok)
		}
		for _, c := range out.Spec.Containers {
			for _, s := range st.Servers {
				if !hasEnv(c, inject.ServerURLEnv(s)) {
					t.Errorf("%s: container %s lacks %s", in, c.Name, inject.ServerURLEnv(s))
				}
			}
		}
	}
}

func hasEnv(c corev1.Container, name string) bool {
	for _, e := range c.Env {
		if e.Name == name {
			return true
		}
	}
	return false
}

func TestSelect(t *testing.T) {
	pod := agentPod()
	other := policy("other-ns", metav1.LabelSelector{})
	other.Namespace = "elsewhere"
	deleting := policy("deleting", metav1.LabelSelector{})
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	got, err := inject.Select(pod, []v1alpha1.ToolPolicy{
		policy("z-all", metav1.LabelSelector{}),
		policy("a-match", metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}),
		policy("no-match", metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}),
		other, deleting,
	})
	if err != nil {
		t.Fatal(err)
	}
	// A policy being deleted still governs until it is gone.
	if len(got) != 3 || got[0].Name != "a-match" || got[1].Name != "deleting" || got[2].Name != "z-all" {
		t.Errorf("Select = %v", names(got))
	}
	_, err = inject.Select(pod, []v1alpha1.ToolPolicy{policy("bad", metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}})})
	if !errors.Is(err, inject.ErrPolicy) {
		t.Errorf("an unparseable selector: err = %v, want ErrPolicy", err)
	}
}

func names(ps []v1alpha1.ToolPolicy) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

func TestCredentialReferences(t *testing.T) {
	secrets := map[string]bool{"creds": true}
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		Volumes: []corev1.Volume{
			{Name: "plain", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}},
			{Name: "mixed", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}},
			}}}},
			{Name: "other", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "unrelated"}}},
		},
		InitContainers: []corev1.Container{{Name: "init", VolumeMounts: []corev1.VolumeMount{{Name: "plain"}}}},
		Containers: []corev1.Container{
			{Name: "a", EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}}}},
			{Name: "b", VolumeMounts: []corev1.VolumeMount{{Name: "mixed"}, {Name: "other"}}},
			{Name: inject.SidecarName, VolumeMounts: []corev1.VolumeMount{{Name: "plain"}}},
		},
		EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: "debug", Env: []corev1.EnvVar{{Name: "T", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}}}}}}},
	}}
	var got []string
	for _, r := range inject.CredentialReferences(pod, secrets) {
		got = append(got, r.Container+":"+r.Via)
	}
	// A container named like the sidecar is checked as every other: a name exempts nothing.
	want := []string{"init:volumeMount plain", "a:envFrom", "b:volumeMount mixed", inject.SidecarName + ":volumeMount plain", "debug:env T"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("CredentialReferences = %v, want %v", got, want)
	}
	if refs := inject.CredentialReferences(pod, nil); refs != nil {
		t.Errorf("no protected secrets, references %v", refs)
	}
}

func TestConfigValidate(t *testing.T) {
	valid := inject.Config{Image: "i", AuthorityURL: "https://authority:443"}.Default()
	if err := valid.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*inject.Config)
		msg    string
	}{
		{"no image", func(c *inject.Config) { c.Image = "" }, "image is required"},
		{"bad port", func(c *inject.Config) { c.Port = 70000 }, "not a TCP port"},
		{"relative authority URL", func(c *inject.Config) { c.AuthorityURL = "/authority" }, "authorityURL"},
		{"short token", func(c *inject.Config) { c.TokenExpirationSeconds = 60 }, "minimum of 600"},
		{"root sidecar", func(c *inject.Config) { c.RunAsUser = -1 }, "non-root"},
		{"bad env name", func(c *inject.Config) { c.URLEnv = []string{"MCP-URL"} }, "not an environment variable name"},
		{"template does not parse", func(c *inject.Config) { c.Template = "{{ .Nope" }, "template"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid
			tc.mutate(&c)
			err := c.Validate()
			if !errors.Is(err, inject.ErrConfig) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("Validate = %v, want ErrConfig containing %q", err, tc.msg)
			}
		})
	}
}

func TestCustomTemplate(t *testing.T) {
	one := []v1alpha1.ToolPolicy{policy("p", metav1.LabelSelector{}, server("tools", ""))}
	for _, tc := range []struct {
		name, template, msg string
	}{
		{"names must carry the actgate- prefix", "spec:\n  containers:\n  - name: helper\n    image: x\n", `"actgate-"`},
		{"a missing key is an error", "spec:\n  containers:\n  - name: actgate-x\n    image: {{ .Nope }}\n", "render"},
		{"the fragment must be a Pod", "spec:\n  notAField: 1\n", "invalid Pod fragment"},
		{"an added name must be new", "spec:\n  containers:\n  - name: actgate-x\n    image: x\n  - name: actgate-x\n    image: y\n", "already exists"},
		{"a template may add a regular container and a label", "metadata:\n  labels:\n    actgate.io/injected: \"true\"\nspec:\n  containers:\n  - name: actgate-helper\n    image: {{ toJSON .Config.Image }}\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := *goldenConfig(t)
			cfg.Template = tc.template
			out, st, err := inject.Inject(agentPod(), one, &cfg)
			if tc.msg != "" {
				if err == nil || !strings.Contains(err.Error(), tc.msg) {
					t.Fatalf("Inject = %v, want an error containing %q", err, tc.msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if out.Labels["actgate.io/injected"] != "true" || len(st.Containers) != 1 || out.Spec.Containers[1].Name != "actgate-helper" {
				t.Errorf("overlay not merged: labels %v, status %+v", out.Labels, st)
			}
			again, _, err := inject.Inject(out, one, &cfg)
			if err != nil {
				t.Fatal(err)
			}
			if a, b := mustYAML(t, out), mustYAML(t, again); a != b {
				t.Errorf("re-injection with a custom template is not idempotent:\n%s", lineDiff(a, b))
			}
		})
	}
}

// A pod cannot bring its own authority trust: its trust annotations are removed, and the
// anchors reach the sidecar only as its own environment (fixed at creation), never through
// pod metadata or a volume of it.
func TestAuthorityTrustIsTheInjectors(t *testing.T) {
	pod := agentPod()
	pod.Annotations = map[string]string{inject.AnnotationAuthorityPublicKey: "forged", inject.AnnotationAuthorityCA: "forged", "keep": "me"}
	one := []v1alpha1.ToolPolicy{policy("p", metav1.LabelSelector{}, server("tools", "creds"))}
	env := func(out *corev1.Pod) map[string]corev1.EnvVar {
		m := map[string]corev1.EnvVar{}
		for _, e := range out.Spec.InitContainers[0].Env {
			m[e.Name] = e
		}
		return m
	}
	cfg := *goldenConfig(t)
	cfg.AuthorityCA, cfg.AuthorityPublicKey = "", ""
	out, _, err := inject.Inject(pod, one, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := out.Annotations[inject.AnnotationAuthorityPublicKey]; ok || out.Annotations["keep"] != "me" {
		t.Errorf("annotations %v", out.Annotations)
	}
	for _, name := range []string{"ACTGATE_AUTHORITY_PUBLIC_KEY", "ACTGATE_AUTHORITY_CA", "ACTGATE_AUTHORITY_PUBLIC_KEY_FILE", "ACTGATE_AUTHORITY_CA_FILE"} {
		if _, ok := env(out)[name]; ok {
			t.Errorf("sidecar given %s without configured trust", name)
		}
	}
	gc := goldenConfig(t)
	out, _, err = inject.Inject(pod, one, gc)
	if err != nil {
		t.Fatal(err)
	}
	e := env(out)
	if e["ACTGATE_AUTHORITY_PUBLIC_KEY"].Value != gc.AuthorityPublicKey || e["ACTGATE_AUTHORITY_CA"].Value != gc.AuthorityCA ||
		e["ACTGATE_AUTHORITY_PUBLIC_KEY"].ValueFrom != nil || e["ACTGATE_AUTHORITY_CA"].ValueFrom != nil {
		t.Errorf("sidecar anchors: %+v %+v", e["ACTGATE_AUTHORITY_PUBLIC_KEY"], e["ACTGATE_AUTHORITY_CA"])
	}
	for k := range out.Annotations {
		if k == inject.AnnotationAuthorityPublicKey || k == inject.AnnotationAuthorityCA {
			t.Errorf("the injected pod carries %s", k)
		}
	}
	for _, v := range out.Spec.Volumes {
		if v.DownwardAPI != nil {
			t.Errorf("volume %s projects pod metadata", v.Name)
		}
	}
}

// The injector's own output, seen again after the API server defaulted it (a webhook's output is
// defaulted before the webhook is reinvoked), injects to itself; the same output with anything
// of the injected parts changed is refused, not repaired.
func TestReinjectDefaultedOutput(t *testing.T) {
	cfg := goldenConfig(t)
	one := []v1alpha1.ToolPolicy{policy("p", metav1.LabelSelector{}, server("tools", "creds"))}
	once, _, err := inject.Inject(agentPod(), one, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defaulted := func() *corev1.Pod {
		p := once.DeepCopy()
		side := &p.Spec.InitContainers[0]
		side.TerminationMessagePath, side.TerminationMessagePolicy = "/dev/termination-log", corev1.TerminationMessageReadFile
		for i := range side.Env {
			if f := side.Env[i].ValueFrom; f != nil && f.FieldRef != nil {
				f.FieldRef.APIVersion = "v1"
			}
		}
		side.ReadinessProbe.SuccessThreshold, side.StartupProbe.SuccessThreshold = 1, 1
		for i := range p.Spec.Volumes {
			if pr := p.Spec.Volumes[i].Projected; pr != nil && pr.DefaultMode == nil {
				pr.DefaultMode = ptr.To[int32](0o644)
			}
		}
		// The ServiceAccount admission plugin, rerun before the webhook is reinvoked, mounts
		// the pod's API token into every container, the sidecar included.
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "kube-api-access-x1", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}}}}}})
		for _, c := range []*corev1.Container{side, &p.Spec.Containers[0]} {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "kube-api-access-x1", MountPath: inject.ServiceAccountMountPath, ReadOnly: true})
		}
		return p
	}
	again, _, err := inject.Inject(defaulted(), one, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(again.Spec.InitContainers[0], once.Spec.InitContainers[0]) {
		t.Errorf("re-injection of the defaulted output changed the sidecar:\n%s", lineDiff(mustYAML(t, once.Spec.InitContainers[0]), mustYAML(t, again.Spec.InitContainers[0])))
	}
	for name, mutate := range map[string]func(*corev1.Pod){
		"sidecar image": func(p *corev1.Pod) { p.Spec.InitContainers[0].Image = "registry.example/not-actgate:1" },
		"sidecar env":   func(p *corev1.Pod) { p.Spec.InitContainers[0].Env[0].Value = "0.0.0.0:15080" },
		"credentials volume": func(p *corev1.Pod) {
			for i := range p.Spec.Volumes {
				if p.Spec.Volumes[i].Name == inject.VolumeCredentials {
					p.Spec.Volumes[i].Projected.DefaultMode = ptr.To[int32](0o777)
				}
			}
		},
		"sidecar removed": func(p *corev1.Pod) { p.Spec.InitContainers = nil },
		"sidecar mounts an author's volume at the token path": func(p *corev1.Pod) {
			p.Spec.Volumes[len(p.Spec.Volumes)-1].Projected.Sources = []corev1.VolumeProjection{{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "fake"}}}}
		},
		"sidecar mounts the API token elsewhere": func(p *corev1.Pod) {
			m := &p.Spec.InitContainers[0].VolumeMounts[len(p.Spec.InitContainers[0].VolumeMounts)-1]
			m.MountPath = "/usr/local/bin"
		},
		"agent mounts token": func(p *corev1.Pod) {
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: inject.VolumeToken, MountPath: "/t"}}
		},
		"status drops an author's volume": func(p *corev1.Pod) {
			p.Annotations[inject.AnnotationStatus] = strings.Replace(p.Annotations[inject.AnnotationStatus], `"volumes":[`, `"volumes":["actgate-extra",`, 1)
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "actgate-extra", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		},
	} {
		t.Run(name, func(t *testing.T) {
			p := defaulted()
			mutate(p)
			if out, _, err := inject.Inject(p, one, cfg); !errors.Is(err, inject.ErrNotInjectable) || out != nil {
				t.Errorf("Inject = %v, want ErrNotInjectable", err)
			}
		})
	}
}
