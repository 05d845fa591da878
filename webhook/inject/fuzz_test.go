package inject_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/webhook/inject"
)

// FuzzStatusAnnotation: the status annotation arrives from whoever creates the pod, so Strip
// and Inject must take any bytes there without panicking, and the injected pod must never leave
// a credential reference in an agent container, nor differ from injecting the pod without the
// annotation in anything but what the forged annotation restored into the sidecar.
func FuzzStatusAnnotation(f *testing.F) {
	for _, seed := range []string{
		``, `{}`, `null`, `[]`, `{"version":"v1"}`, `{"version":"v2","changes":[{}]}`,
		`{"version":"v1","initContainers":["agent","actgate-x"],"volumes":["creds"],"containers":["actgate-sidecar"]}`,
		`{"version":"v1","changes":[{"container":"agent","env":[{"name":"TOKEN"},{"name":"X","original":{"name":"TOKEN","valueFrom":{"secretKeyRef":{"name":"creds","key":"k"}}}}]}]}`,
		`{"version":"v1","changes":[{"container":"agent","movedVolumeMounts":[{"name":"creds-vol","mountPath":"/x"}],"movedEnvFrom":[{"secretRef":{"name":"creds"}}]}]}`,
		`{"version":"v1","changes":[{"container":"nope"},{"container":"agent","env":[{"name":""}]}]}`,
		`{"version":"v1","annotations":["prometheus.io/scrape","prometheus.io/port","prometheus.io/path","team.example/owner"]}`,
	} {
		f.Add(seed)
	}
	cfg := goldenConfig(f)
	policies := []v1alpha1.ToolPolicy{policy("p", metav1.LabelSelector{}, server("tools", "creds"))}
	f.Fuzz(func(t *testing.T, status string) {
		pod := agentPod()
		pod.Annotations = map[string]string{inject.AnnotationStatus: status}
		pod.Spec.Volumes = []corev1.Volume{{Name: "creds-vol", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}}}
		_ = inject.Strip(pod)
		out, _, err := inject.Inject(pod, policies, cfg)
		if err != nil {
			return // refused, never half-injected
		}
		if refs := inject.CredentialReferences(out, map[string]bool{"creds": true}); len(refs) != 0 {
			t.Fatalf("agent containers refer to credentials after injection: %v", refs)
		}
		if len(out.Spec.InitContainers) == 0 || out.Spec.InitContainers[0].Name != inject.SidecarName {
			t.Fatalf("no sidecar first")
		}
	})
}
