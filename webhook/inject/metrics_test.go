package inject_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/webhook/inject"
)

func sidecarOf(t *testing.T, pod *corev1.Pod) corev1.Container {
	t.Helper()
	i := slices.IndexFunc(pod.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == inject.SidecarName })
	if i < 0 {
		t.Fatalf("no %s in the injected pod", inject.SidecarName)
	}
	return pod.Spec.InitContainers[i]
}

func envValue(c corev1.Container, name string) (string, bool) {
	i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })
	if i < 0 {
		return "", false
	}
	return c.Env[i].Value, true
}

// TestInjectMetrics: the sidecar is told to serve metrics on Config.MetricsPort and declares
// it as actgate-metrics; the conventional scrape annotations are added only to a pod that has
// no prometheus.io/ annotation (a user's are never overwritten or completed); metricsPort 0
// gives none of it.
func TestInjectMetrics(t *testing.T) {
	one := []v1alpha1.ToolPolicy{policy("p", metav1.LabelSelector{}, server("tools", "creds"))}
	scrape := map[string]string{
		inject.AnnotationPrometheusScrape: "true", inject.AnnotationPrometheusPort: "9788", inject.AnnotationPrometheusPath: "/metrics",
	}
	for _, tc := range []struct {
		name        string
		metricsPort *int32 // nil: the default
		own         map[string]string
		wantListen  string // "" : no metrics variable and no port
		wantAnn     map[string]string
		wantAdded   bool // the injector added (and the status records) the three scrape annotations
	}{
		{"default: port 9788, flag, port and annotations", nil, nil, ":9788", scrape, true},
		{"another port", ptr.To[int32](9100), map[string]string{"team.example/owner": "billing"}, ":9100", map[string]string{
			inject.AnnotationPrometheusScrape: "true", inject.AnnotationPrometheusPort: "9100", inject.AnnotationPrometheusPath: "/metrics",
			"team.example/owner": "billing",
		}, true},
		{"the pod's own scrape annotations are kept whole", nil,
			map[string]string{inject.AnnotationPrometheusScrape: "true", inject.AnnotationPrometheusPort: "8080"}, ":9788",
			map[string]string{inject.AnnotationPrometheusScrape: "true", inject.AnnotationPrometheusPort: "8080"}, false},
		{"a pod that opts out of scraping stays out", nil,
			map[string]string{inject.AnnotationPrometheusScrape: "false"}, ":9788",
			map[string]string{inject.AnnotationPrometheusScrape: "false"}, false},
		{"any prometheus.io/ annotation is the pod's own configuration", nil,
			map[string]string{"prometheus.io/scheme": "https"}, ":9788", map[string]string{"prometheus.io/scheme": "https"}, false},
		{"metricsPort 0: no metrics at all", ptr.To[int32](0), nil, "", nil, false},
		{"metricsPort 0 leaves the pod's annotations alone", ptr.To[int32](0),
			map[string]string{inject.AnnotationPrometheusScrape: "true"}, "", map[string]string{inject.AnnotationPrometheusScrape: "true"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := *goldenConfig(t)
			if tc.metricsPort != nil {
				cfg.MetricsPort = tc.metricsPort
			}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			pod := agentPod()
			pod.Annotations = tc.own
			out, st, err := inject.Inject(pod, one, &cfg)
			if err != nil {
				t.Fatal(err)
			}
			side := sidecarOf(t, out)
			listen, set := envValue(side, "ACTGATE_METRICS_BIND_ADDRESS")
			if listen != tc.wantListen || set != (tc.wantListen != "") {
				t.Errorf("ACTGATE_METRICS_BIND_ADDRESS = %q (set %v), want %q", listen, set, tc.wantListen)
			}
			if tc.wantListen == "" {
				if len(side.Ports) != 0 {
					t.Errorf("metrics disabled, yet the sidecar declares ports %+v", side.Ports)
				}
			} else {
				want := []corev1.ContainerPort{{Name: inject.MetricsPortName, ContainerPort: *cfg.MetricsPort, Protocol: corev1.ProtocolTCP}}
				if !slices.Equal(side.Ports, want) {
					t.Errorf("sidecar ports %+v, want %+v", side.Ports, want)
				}
			}
			got := map[string]string{}
			for k, v := range out.Annotations {
				if !strings.HasPrefix(k, "actgate.io/") {
					got[k] = v
				}
			}
			if len(got) != len(tc.wantAnn) {
				t.Errorf("annotations %v, want %v", got, tc.wantAnn)
			}
			for k, v := range tc.wantAnn {
				if got[k] != v {
					t.Errorf("annotation %s = %q, want %q (all: %v)", k, got[k], v, got)
				}
			}
			// The status names exactly the scrape annotations the injector added, so Strip
			// removes those and never the pod's own.
			var recorded []string
			for _, a := range st.Annotations {
				if strings.HasPrefix(a, inject.PrometheusAnnotationPrefix) {
					recorded = append(recorded, a)
				}
			}
			wantRecorded := 0
			if tc.wantAdded {
				wantRecorded = 3
			}
			if len(recorded) != wantRecorded {
				t.Errorf("status records %v as added, want %d scrape annotations", recorded, wantRecorded)
			}
			stripped := inject.Strip(out)
			for k, v := range tc.own {
				if stripped.Annotations[k] != v {
					t.Errorf("Strip lost the pod's own %s=%q: %v", k, v, stripped.Annotations)
				}
			}
			if wantRecorded > 0 && hasScrapeAnnotation(stripped) {
				t.Errorf("Strip left the injector's scrape annotations: %v", stripped.Annotations)
			}
		})
	}
}

func hasScrapeAnnotation(p *corev1.Pod) bool {
	for k := range p.Annotations {
		if strings.HasPrefix(k, inject.PrometheusAnnotationPrefix) {
			return true
		}
	}
	return false
}

// TestReinjectionFollowsMetricsPort: a pod whose manifest is copied from an injected one is
// refused under a new configuration (its sidecar is not what the injector adds now, and the
// injector does not take a pod's word for what it added); stripped, it is injected under the new
// configuration, and the annotations the injector added are replaced rather than kept as if they
// were the pod's own.
func TestReinjectionFollowsMetricsPort(t *testing.T) {
	one := []v1alpha1.ToolPolicy{policy("p", metav1.LabelSelector{}, server("tools", "creds"))}
	first, _, err := inject.Inject(agentPod(), one, goldenConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	moved := *goldenConfig(t)
	moved.MetricsPort = ptr.To[int32](9100)
	if out, _, err := inject.Inject(first, one, &moved); !errors.Is(err, inject.ErrNotInjectable) || out != nil {
		t.Fatalf("a copied injected manifest under a new configuration: Inject = %v, want ErrNotInjectable", err)
	}
	first = inject.Strip(first)
	again, _, err := inject.Inject(first, one, &moved)
	if err != nil {
		t.Fatal(err)
	}
	if got := again.Annotations[inject.AnnotationPrometheusPort]; got != "9100" {
		t.Errorf("after re-injection with metricsPort 9100, prometheus.io/port = %q", got)
	}
	off := *goldenConfig(t)
	off.MetricsPort = ptr.To[int32](0)
	none, _, err := inject.Inject(first, one, &off)
	if err != nil {
		t.Fatal(err)
	}
	if hasScrapeAnnotation(none) || len(sidecarOf(t, none).Ports) != 0 {
		t.Errorf("after re-injection with metrics off: annotations %v, ports %+v", none.Annotations, sidecarOf(t, none).Ports)
	}
}

// TestMetricsPortTaken: a pod declaring the metrics port is refused (the sidecar could not
// bind it and the pod would never start), unless metrics are off.
func TestMetricsPortTaken(t *testing.T) {
	one := []v1alpha1.ToolPolicy{policy("p", metav1.LabelSelector{}, server("tools", "creds"))}
	pod := agentPod()
	pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "metrics", ContainerPort: inject.DefaultMetricsPort}}
	out, _, err := inject.Inject(pod, one, goldenConfig(t))
	if !errors.Is(err, inject.ErrNotInjectable) || !strings.Contains(err.Error(), "metrics port") || out != nil {
		t.Fatalf("Inject = %v, %v; want ErrNotInjectable naming the metrics port", out != nil, err)
	}
	off := *goldenConfig(t)
	off.MetricsPort = ptr.To[int32](0)
	if _, _, err := inject.Inject(pod, one, &off); err != nil {
		t.Errorf("metrics off, the port is the pod's to use: %v", err)
	}
}

func TestConfigMetricsPort(t *testing.T) {
	def := inject.Config{Image: "i", AuthorityURL: "https://authority:443"}.Default()
	if def.MetricsPort == nil || *def.MetricsPort != inject.DefaultMetricsPort {
		t.Fatalf("default metricsPort = %v, want %d", def.MetricsPort, inject.DefaultMetricsPort)
	}
	// As the manager reads it (webhook.LoadConfig: strict YAML, then Default): an explicit 0
	// stays 0 (disabled), absent becomes the default.
	for doc, want := range map[string]int32{"image: i\nmetricsPort: 0\n": 0, "image: i\n": inject.DefaultMetricsPort, "image: i\nmetricsPort: 9100\n": 9100} {
		var c inject.Config
		if err := yaml.UnmarshalStrict([]byte(doc), &c); err != nil {
			t.Fatal(err)
		}
		if c = c.Default(); c.MetricsPort == nil || *c.MetricsPort != want {
			t.Errorf("%q: metricsPort %v after Default, want %d", doc, c.MetricsPort, want)
		}
	}
	for _, tc := range []struct {
		name string
		port int32
		msg  string // "" : valid
	}{
		{"disabled", 0, ""},
		{"another port", 9100, ""},
		{"the sidecar's own port", inject.DefaultPort, "is the sidecar's port"},
		{"negative", -1, "not a TCP port"},
		{"too large", 65536, "not a TCP port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := def
			c.MetricsPort = ptr.To(tc.port)
			err := c.Validate()
			if tc.msg == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, inject.ErrConfig) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("Validate = %v, want ErrConfig containing %q", err, tc.msg)
			}
		})
	}
}

// TestOverlayNeverOverwritesAnnotations: a template's annotation the pod already carries keeps
// the pod's value and is not recorded as the injector's.
func TestOverlayNeverOverwritesAnnotations(t *testing.T) {
	one := []v1alpha1.ToolPolicy{policy("p", metav1.LabelSelector{}, server("tools", ""))}
	cfg := *goldenConfig(t)
	cfg.Template = "metadata:\n  annotations:\n    team.example/owner: actgate\n    team.example/new: x\n" +
		"spec:\n  initContainers:\n  - name: actgate-sidecar\n    image: {{ toJSON .Config.Image }}\n"
	pod := agentPod()
	pod.Annotations = map[string]string{"team.example/owner": "billing"}
	out, st, err := inject.Inject(pod, one, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	if out.Annotations["team.example/owner"] != "billing" || out.Annotations["team.example/new"] != "x" {
		t.Errorf("annotations %v", out.Annotations)
	}
	if slices.Contains(st.Annotations, "team.example/owner") || !slices.Contains(st.Annotations, "team.example/new") {
		t.Errorf("status annotations %v", st.Annotations)
	}
}
