package inject_test

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/webhook/inject"
)

// TestInjectUpstreamCA: with upstreamCA the sidecar, and only the sidecar, mounts the named
// ConfigMap or Secret key read-only at /var/run/actgate/upstream-ca/ca.crt and is told the file
// by ACTGATE_UPSTREAM_CA_FILE (--upstream-ca-file); without it nothing is added; Strip removes
// the volume; a bad upstreamCA is refused.
func TestInjectUpstreamCA(t *testing.T) {
	one := []v1alpha1.ToolPolicy{policy("p", metav1.LabelSelector{}, server("tools", "creds"))}
	for _, tc := range []struct {
		name    string
		ca      *inject.UpstreamCA
		wantKey string
	}{
		{"absent", nil, ""},
		{"configMap, default key", &inject.UpstreamCA{ConfigMap: "corp-ca"}, "ca.crt"},
		{"secret, own key", &inject.UpstreamCA{Secret: "corp-ca", Key: "bundle.pem"}, "bundle.pem"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := goldenConfig(t)
			cfg.UpstreamCA = tc.ca
			c := cfg.Default()
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			out, _, err := inject.Inject(agentPod(), one, &c)
			if err != nil {
				t.Fatal(err)
			}
			side := sidecarOf(t, out)
			v, set := envValue(side, "ACTGATE_UPSTREAM_CA_FILE")
			vi := slices.IndexFunc(out.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == inject.VolumeUpstreamCA })
			mi := slices.IndexFunc(side.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == inject.VolumeUpstreamCA })
			if tc.ca == nil {
				if set || vi >= 0 || mi >= 0 {
					t.Fatalf("no upstreamCA, yet env %v volume %d mount %d", set, vi, mi)
				}
				return
			}
			if v != "/var/run/actgate/upstream-ca/ca.crt" {
				t.Errorf("ACTGATE_UPSTREAM_CA_FILE = %q (set %v)", v, set)
			}
			if mi < 0 || !side.VolumeMounts[mi].ReadOnly || side.VolumeMounts[mi].MountPath != "/var/run/actgate/upstream-ca" {
				t.Fatalf("sidecar mounts: %+v", side.VolumeMounts)
			}
			for _, ac := range out.Spec.Containers {
				if slices.ContainsFunc(ac.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == inject.VolumeUpstreamCA }) {
					t.Errorf("agent container %s mounts the upstream CA", ac.Name)
				}
			}
			if vi < 0 {
				t.Fatalf("no %s volume: %+v", inject.VolumeUpstreamCA, out.Spec.Volumes)
			}
			vol := out.Spec.Volumes[vi]
			var items []corev1.KeyToPath
			var mode *int32
			switch {
			case tc.ca.ConfigMap != "" && vol.ConfigMap != nil && vol.ConfigMap.Name == tc.ca.ConfigMap:
				items, mode = vol.ConfigMap.Items, vol.ConfigMap.DefaultMode
			case tc.ca.Secret != "" && vol.Secret != nil && vol.Secret.SecretName == tc.ca.Secret:
				items, mode = vol.Secret.Items, vol.Secret.DefaultMode
			default:
				t.Fatalf("volume %+v does not project %+v", vol, tc.ca)
			}
			if len(items) != 1 || items[0].Key != tc.wantKey || items[0].Path != "ca.crt" {
				t.Errorf("items %+v, want %s → ca.crt", items, tc.wantKey)
			}
			if mode == nil || *mode != 0o444 {
				t.Errorf("defaultMode %v, want 0444 (readable by the sidecar's non-root user)", mode)
			}
			if s := inject.Strip(out); slices.ContainsFunc(s.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == inject.VolumeUpstreamCA }) {
				t.Error("Strip left the upstream CA volume")
			}
		})
	}
	for _, tc := range []struct {
		ca   inject.UpstreamCA
		want string
	}{
		{inject.UpstreamCA{}, "exactly one of configMap and secret"},
		{inject.UpstreamCA{ConfigMap: "a", Secret: "b"}, "exactly one of configMap and secret"},
		{inject.UpstreamCA{ConfigMap: "Not_A_Name"}, "is not a ConfigMap name"},
		{inject.UpstreamCA{Secret: "../etc"}, "is not a Secret name"},
		{inject.UpstreamCA{ConfigMap: "corp-ca", Key: "a/b"}, "upstreamCA.key"},
	} {
		cfg := goldenConfig(t)
		ca := tc.ca
		cfg.UpstreamCA = &ca
		c := cfg.Default()
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error with %q", tc.ca, err, tc.want)
		}
	}
}
