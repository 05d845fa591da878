package attacks

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/test/envtest"
	"github.com/actgate/actgate/webhook/inject"
)

// What a pod's author writes never decides what is trusted (docs/security.md "What a pod's
// author can and cannot do"): the pods below are created by the agent's own service account in
// an inject-enabled namespace, through the real API server and actgate's webhooks.

// authorNamespace is an inject-enabled namespace with the payments policy and an author (the
// agent's service account) allowed to create pods and add ephemeral containers.
func authorNamespace(t *testing.T, e *envtest.Env) (string, *envtest.User) {
	t.Helper()
	ns := namespace(t, e, map[string]string{inject.LabelInject: "true"})
	if err := e.Client.Create(kctx(t), governedPolicy(ns)); err != nil {
		t.Fatal(err)
	}
	author := serviceAccountUser(t, e, ns, "billing-agent")
	grant(t, e, ns, author.Name, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "get"}},
		{APIGroups: []string{""}, Resources: []string{"pods/ephemeralcontainers"}, Verbs: []string{"update", "patch"}},
	})
	waitCan(t, e, ns, author.Name, "create", "pods", "")
	return ns, author
}

// notStored fails t when the pod name exists in ns.
func notStored(t *testing.T, e *envtest.Env, ns, name string) {
	t.Helper()
	err := e.Client.Get(kctx(t), client.ObjectKey{Namespace: ns, Name: name}, &corev1.Pod{})
	if !apierrors.IsNotFound(err) {
		stored := &corev1.Pod{}
		_ = e.Client.Get(kctx(t), client.ObjectKey{Namespace: ns, Name: name}, stored)
		t.Fatalf("pod %s/%s was stored (err %v): containers %+v volumes %+v", ns, name, err, stored.Spec.Containers, stored.Spec.Volumes)
	}
}

// TestPodAuthorMountsInjectorVolumes: a governed agent pod declares its own emptyDir volumes
// named like the injector's credentials, authority-token and journal volumes and mounts them.
// Were the injector's volumes put in their place, the stored agent container would mount the
// projected credential, the authority-audience token and the journal. The API server refuses
// the pod; so it does each single volume, a mount of one with a subPath from a second
// container, a forged sidecar, and a forged status annotation.
func TestPodAuthorMountsInjectorVolumes(t *testing.T) {
	e := kube(t)
	ns, author := authorNamespace(t, e)
	emptyDir := func(name string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	}
	mount := func(name string) corev1.VolumeMount {
		return corev1.VolumeMount{Name: name, MountPath: "/stolen/" + name}
	}

	for i, tc := range []struct {
		name   string
		mutate func(*corev1.Pod)
		want   string
	}{
		{"all three volumes", func(p *corev1.Pod) {
			for _, v := range []string{inject.VolumeCredentials, inject.VolumeToken, inject.VolumeJournal} {
				p.Spec.Volumes = append(p.Spec.Volumes, emptyDir(v))
				p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, mount(v))
			}
		}, `container "agent" mounts volume "actgate-credentials"`},
		{"the token volume alone", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{emptyDir(inject.VolumeToken)}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{mount(inject.VolumeToken)}
		}, `mounts volume "actgate-token"`},
		{"the journal from a second container by subPath", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{emptyDir(inject.VolumeJournal)}
			m := mount(inject.VolumeJournal)
			m.SubPath = "keys"
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "helper", Image: "registry.example/helper:1", VolumeMounts: []corev1.VolumeMount{m}})
		}, `container "helper" mounts volume "actgate-journal"`},
		{"a sidecar of its own", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: inject.SidecarName, Image: "registry.example/not-actgate:1",
				RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}}
		}, `init container "actgate-sidecar" that the actgate injector did not add`},
		{"a forged status handing back a mount", func(p *corev1.Pod) {
			p.Annotations = map[string]string{inject.AnnotationStatus: fmt.Sprintf(
				`{"version":"v1","policies":[%q],"servers":["payments"],"changes":[{"container":"agent","movedVolumeMounts":[{"name":%q,"mountPath":"/stolen"}]}]}`,
				ns+"/payments", inject.VolumeCredentials)}
		}, `container "agent" mounts volume "actgate-credentials"`},
	} {
		name := fmt.Sprintf("billing-agent-%d", i)
		t.Run(tc.name, func(t *testing.T) {
			p := agentPod(ns, name, nil, nil)
			tc.mutate(p)
			err := author.Client.Create(kctx(t), p)
			if err == nil {
				t.Fatalf("admitted; the stored agent containers reach %s", reached(storedPod(t, e, ns, name)))
			}
			forbidden(t, "create", err, "pod cannot be governed by the actgate sidecar", tc.want)
			notStored(t, e, ns, name)
		})
	}
}

// TestPodAuthorNamesContainerLikeSidecar: in an inject-enabled namespace, a candidate pod no
// ToolPolicy selects, whose own container is named like the sidecar and holds the governed
// credential by secretKeyRef, is refused exactly as the same container named "agent" is; an
// ephemeral container of that name holding the credential is refused too.
func TestPodAuthorNamesContainerLikeSidecar(t *testing.T) {
	e := kube(t)
	ns, author := authorNamespace(t, e)

	t.Run("the same container named agent", func(t *testing.T) {
		control := agentPod(ns, "unselected-agent", map[string]string{"app": "other"}, nil)
		forbidden(t, "unselected pod holding the credential", author.Client.Create(kctx(t), control), "no ToolPolicy selects this pod")
	})

	t.Run("a container named like the sidecar", func(t *testing.T) {
		p := agentPod(ns, "unselected-sidecar", map[string]string{"app": "other"}, nil)
		p.Spec.Containers[0].Name, p.Spec.Containers[0].Image = inject.SidecarName, "registry.example/anything:1"
		err := author.Client.Create(kctx(t), p)
		if err == nil {
			t.Fatalf("admitted; the stored pod's own containers reach %s", reached(storedPod(t, e, ns, p.Name)))
		}
		forbidden(t, "unselected pod whose container is named like the sidecar", err, "no ToolPolicy selects this pod", `container "actgate-sidecar"`)
		notStored(t, e, ns, p.Name)
	})

	// An unselected pod without the credential is admitted, uninjected; an ephemeral
	// container named like the sidecar may not bring the credential to it.
	t.Run("an ephemeral container named like the sidecar", func(t *testing.T) { ephemeralLikeSidecar(t, e, ns, author) })
}

func ephemeralLikeSidecar(t *testing.T, e *envtest.Env, ns string, author *envtest.User) {
	plain := agentPod(ns, "unselected-plain", map[string]string{"app": "other"}, nil)
	plain.Spec.Containers[0].Env = nil
	if err := author.Client.Create(kctx(t), plain); err != nil {
		t.Fatal(err)
	}
	stored := storedPod(t, e, ns, plain.Name)
	stored.Spec.EphemeralContainers = append(stored.Spec.EphemeralContainers, corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: inject.SidecarName, Image: "registry.example/anything:1",
		Env: []corev1.EnvVar{{Name: "PAYMENTS_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "payments-mcp"}, Key: "token"}}}},
	}})
	err := author.Client.SubResource("ephemeralcontainers").Update(kctx(t), stored)
	forbidden(t, "ephemeral container named like the sidecar", err, "actgate-sidecar")
	if got := storedPod(t, e, ns, plain.Name); len(got.Spec.EphemeralContainers) != 0 {
		t.Fatalf("ephemeral containers %+v", got.Spec.EphemeralContainers)
	}
}

// TestPodAuthorCopiesInjectedPod: the injector's own output, as the API server stored it
// (defaulted), created again — what the webhook sees when the API server reinvokes it — is
// admitted with the very same sidecar and volumes; the same copy with its sidecar's image
// changed is refused, not repaired.
func TestPodAuthorCopiesInjectedPod(t *testing.T) {
	e := kube(t)
	ns, author := authorNamespace(t, e)
	if err := author.Client.Create(kctx(t), agentPod(ns, "original", nil, nil)); err != nil {
		t.Fatal(err)
	}
	orig := storedPod(t, e, ns, "original")
	if !sidecarInjected(orig) {
		t.Fatal("the pod was not injected")
	}
	copyOf := func(name string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: orig.Labels, Annotations: orig.Annotations}, Spec: *orig.Spec.DeepCopy()}
		p.Spec.NodeName = ""
		return p
	}
	if err := author.Client.Create(kctx(t), copyOf("copy")); err != nil {
		t.Fatalf("the injector's own defaulted output was refused: %v", err)
	}
	got := storedPod(t, e, ns, "copy")
	if !equality.Semantic.DeepEqual(got.Spec.InitContainers, orig.Spec.InitContainers) || !equality.Semantic.DeepEqual(got.Spec.Volumes, orig.Spec.Volumes) ||
		got.Annotations[inject.AnnotationStatus] != orig.Annotations[inject.AnnotationStatus] {
		t.Fatalf("re-injection changed the injected parts:\n%+v\n%+v", got.Spec.InitContainers, orig.Spec.InitContainers)
	}
	forged := copyOf("forged")
	forged.Spec.InitContainers[0].Image = "registry.example/not-actgate:1"
	forbidden(t, "copy with another sidecar image", author.Client.Create(kctx(t), forged), `init container "actgate-sidecar" that the actgate injector did not add`)
	notStored(t, e, ns, "forged")
}

// reached names the credential references and injected volumes that a stored pod's containers
// other than the injector's sidecar hold, for a failure message: what the author got.
func reached(p *corev1.Pod) string {
	var out []string
	volumes := map[string]string{}
	for _, v := range p.Spec.Volumes {
		switch {
		case v.Projected != nil && len(v.Projected.Sources) > 0 && v.Projected.Sources[0].Secret != nil:
			volumes[v.Name] = "projected Secret " + v.Projected.Sources[0].Secret.Name
		case v.Projected != nil && len(v.Projected.Sources) > 0 && v.Projected.Sources[0].ServiceAccountToken != nil:
			volumes[v.Name] = "token for " + v.Projected.Sources[0].ServiceAccountToken.Audience
		case v.EmptyDir != nil:
			volumes[v.Name] = "emptyDir"
		}
	}
	st, _ := inject.StatusOf(p)
	for _, c := range append(slices.Clone(p.Spec.InitContainers), p.Spec.Containers...) {
		if st != nil && slices.Contains(st.InitContainers, c.Name) {
			continue
		}
		for _, m := range c.VolumeMounts {
			if what, ok := volumes[m.Name]; ok {
				out = append(out, fmt.Sprintf("%s mounts %s (%s)", c.Name, m.Name, what))
			}
		}
		for _, v := range c.Env {
			if v.ValueFrom != nil && v.ValueFrom.SecretKeyRef != nil {
				out = append(out, fmt.Sprintf("%s env %s from Secret %s", c.Name, v.Name, v.ValueFrom.SecretKeyRef.Name))
			}
		}
	}
	return strings.Join(out, "; ")
}
