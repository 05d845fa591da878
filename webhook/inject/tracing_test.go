package inject_test

import (
	"math"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/webhook/inject"
)

// TestInjectTracing: the sidecar gets ACTGATE_TRACING_ENDPOINT (and the ratio when set) only
// when the injection config has a tracing endpoint; a bad tracing section is refused.
func TestInjectTracing(t *testing.T) {
	one := []v1alpha1.ToolPolicy{policy("p", metav1.LabelSelector{}, server("tools", "creds"))}
	const ep = "http://otel-collector.observability.svc:4318/v1/traces"
	for _, tc := range []struct {
		name                 string
		tracing              *inject.Tracing
		wantEndpoint, wantRt string
	}{
		{"absent: off", nil, "", ""},
		{"empty endpoint: off", &inject.Tracing{}, "", ""},
		{"endpoint only", &inject.Tracing{Endpoint: ep}, ep, ""},
		{"endpoint and ratio", &inject.Tracing{Endpoint: ep, SampleRatio: ptr.To(0.25)}, ep, "0.25"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := *goldenConfig(t)
			cfg.Tracing = tc.tracing
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			out, _, err := inject.Inject(agentPod(), one, &cfg)
			if err != nil {
				t.Fatal(err)
			}
			side := sidecarOf(t, out)
			if v, set := envValue(side, "ACTGATE_TRACING_ENDPOINT"); v != tc.wantEndpoint || set != (tc.wantEndpoint != "") {
				t.Errorf("ACTGATE_TRACING_ENDPOINT = %q (set %v), want %q", v, set, tc.wantEndpoint)
			}
			if v, set := envValue(side, "ACTGATE_TRACING_SAMPLE_RATIO"); v != tc.wantRt || set != (tc.wantRt != "") {
				t.Errorf("ACTGATE_TRACING_SAMPLE_RATIO = %q (set %v), want %q", v, set, tc.wantRt)
			}
		})
	}
	for name, tr := range map[string]*inject.Tracing{
		"ratio without endpoint": {SampleRatio: ptr.To(0.5)},
		"ratio above 1":          {Endpoint: ep, SampleRatio: ptr.To(1.5)},
		"NaN ratio":              {Endpoint: ep, SampleRatio: ptr.To(math.NaN())},
		"not a URL":              {Endpoint: "collector:4318"},
		"user info":              {Endpoint: "http://u:p@collector:4318/v1/traces"},
	} {
		cfg := *goldenConfig(t)
		cfg.Tracing = tr
		if err := cfg.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
