package inject_test

import (
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/webhook/inject"
)

// FuzzStatusAnnotation: the status annotation arrives from whoever creates the pod, so Strip
// and Inject must take any bytes there without panicking. On a pod without the injector's parts
// any annotation is refused (it is not the injector's record). On the injector's own output
// with the annotation replaced, the pod is refused or injected with the very same sidecar and
// volumes, and no container but the ones this injection added refers to a credential.
func FuzzStatusAnnotation(f *testing.F) {
	for _, seed := range []string{
		``, `{}`, `null`, `[]`, `{"version":"v1"}`, `{"version":"v2","changes":[{}]}`,
		`{"version":"v1","initContainers":["agent","actgate-x"],"volumes":["creds"],"containers":["actgate-sidecar"]}`,
		`{"version":"v1","changes":[{"container":"agent","env":[{"name":"TOKEN"},{"name":"X","original":{"name":"TOKEN","valueFrom":{"secretKeyRef":{"name":"creds","key":"k"}}}}]}]}`,
		`{"version":"v1","changes":[{"container":"agent","movedVolumeMounts":[{"name":"creds-vol","mountPath":"/x"}],"movedEnvFrom":[{"secretRef":{"name":"creds"}}]}]}`,
		`{"version":"v1","changes":[{"container":"agent","movedVolumeMounts":[{"name":"actgate-credentials","mountPath":"/x"},{"name":"actgate-journal","mountPath":"/j","subPath":"k"}]}]}`,
		`{"version":"v1","changes":[{"container":"nope"},{"container":"agent","env":[{"name":""}]}]}`,
		`{"version":"v1","annotations":["prometheus.io/scrape","prometheus.io/port","prometheus.io/path","team.example/owner"]}`,
		`{"version":"v1","initContainers":["actgate-sidecar"],"volumes":["actgate-token","actgate-journal","actgate-credentials"]}`,
	} {
		f.Add(seed)
	}
	cfg := goldenConfig(f)
	policies := []v1alpha1.ToolPolicy{policy("p", metav1.LabelSelector{}, server("tools", "creds"))}
	bare := agentPod()
	bare.Spec.Volumes = []corev1.Volume{{Name: "creds-vol", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}}}
	bare.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "creds-vol", MountPath: "/creds"}}
	once, _, err := inject.Inject(bare, policies, cfg)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, status string) {
		pod := bare.DeepCopy()
		pod.Annotations = map[string]string{inject.AnnotationStatus: status}
		_ = inject.Strip(pod)
		if out, _, err := inject.Inject(pod, policies, cfg); !errors.Is(err, inject.ErrNotInjectable) || out != nil {
			t.Fatalf("a status annotation on a pod without the injector's parts: Inject = %v", err)
		}

		pod = once.DeepCopy()
		pod.Annotations[inject.AnnotationStatus] = status
		_ = inject.Strip(pod)
		out, st, err := inject.Inject(pod, policies, cfg)
		if err != nil {
			if !errors.Is(err, inject.ErrNotInjectable) {
				t.Fatalf("Inject = %v, want ErrNotInjectable", err)
			}
			return // refused, never half-injected
		}
		for _, r := range inject.CredentialReferences(out, map[string]bool{"creds": true}) {
			if !slices.Contains(st.InitContainers, r.Container) && !slices.Contains(st.Containers, r.Container) {
				t.Fatalf("a container the injection did not add refers to a credential: %v", r)
			}
		}
		if !equality.Semantic.DeepEqual(out.Spec.InitContainers, once.Spec.InitContainers) || !equality.Semantic.DeepEqual(out.Spec.Volumes, once.Spec.Volumes) {
			t.Fatalf("the injected parts differ from the injector's own")
		}
	})
}
