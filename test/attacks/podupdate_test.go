package attacks

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/test/envtest"
	"github.com/actgate/actgate/webhook"
	"github.com/actgate/actgate/webhook/inject"
)

// actgateManager is the manager's service account, the one user the harness's webhook
// configuration lets change what the injector added (webhook.Config.ActgateUsers).
const actgateManager = "system:serviceaccount:actgate-system:actgate-manager"

// TestPodUpdateSidecarSwap: an agent whose service account may patch (and resize, and add
// ephemeral containers to) its own pod tries, after admission, to swap the sidecar's image,
// rewrite the actgate annotations the trust anchors once came from, change the sidecar's
// resources or environment, mount the sidecar's journal from an ephemeral container, or relabel
// the pod so that a laxer ToolPolicy governs it. The
// API server refuses each, the stored pod keeps its sidecar, and what the sidecar trusts (its
// public key and CA, resolved from the stored pod as the kubelet would) stays the authority's.
// actgate's own identity may still update, and a pod actgate does not govern is left to its
// owner.
func TestPodUpdateSidecarSwap(t *testing.T) {
	e := kube(t)
	ns := namespace(t, e, map[string]string{inject.LabelInject: "true"})
	if err := e.Client.Create(kctx(t), governedPolicy(ns)); err != nil {
		t.Fatal(err)
	}
	agentSA := serviceAccountUser(t, e, ns, "billing-agent")
	grant(t, e, ns, agentSA.Name, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"patch", "get", "update"}},
		{APIGroups: []string{""}, Resources: []string{"pods/resize", "pods/ephemeralcontainers"}, Verbs: []string{"patch", "update"}},
	})
	const name = "billing-agent-0"
	pod := agentPod(ns, name, nil, nil)
	// Burstable, so that resizing the sidecar need not change the pod's QoS class (which the
	// API server itself refuses).
	pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}
	if err := e.Client.Create(kctx(t), pod); err != nil {
		t.Fatal(err)
	}
	injected := storedPod(t, e, ns, name)
	if !sidecarInjected(injected) {
		t.Fatal("the pod was not injected")
	}
	wantKey, wantCA := authorityAnchors(t, e.Root)
	if key, ca := sidecarAnchors(t, injected); key != wantKey || ca != wantCA {
		t.Fatalf("the injected sidecar trusts key %q and CA %q, not the authority's", key, ca)
	}
	manager := actgateUser(t, e, ns)
	target := func() *corev1.Pod { return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}} }
	merge := func(body string) client.Patch { return client.RawPatch(types.MergePatchType, []byte(body)) }
	strategic := func(body string) client.Patch { return client.RawPatch(types.StrategicMergePatchType, []byte(body)) }
	const evilImage = "registry.example/attacker/fake-sidecar:1"
	sidecarImage := strategic(fmt.Sprintf(`{"spec":{"initContainers":[{"name":%q,"image":%q}]}}`, inject.SidecarName, evilImage))
	forgedAnchors := merge(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q,%q:%q}}}`,
		inject.AnnotationAuthorityPublicKey, "-----BEGIN PUBLIC KEY-----\nthe attacker's key\n-----END PUBLIC KEY-----\n",
		inject.AnnotationAuthorityCA, "-----BEGIN CERTIFICATE-----\nthe attacker's CA\n-----END CERTIFICATE-----\n"))

	t.Run("agent swaps the sidecar image", func(t *testing.T) {
		err := agentSA.Client.Patch(kctx(t), target(), sidecarImage)
		forbidden(t, "sidecar image patch by the agent", err, "only actgate may change", agentSA.Name, "init container "+inject.SidecarName+" image")
		if got := sidecarContainer(storedPod(t, e, ns, name)); got.Image != sidecarContainer(injected).Image {
			t.Fatalf("the sidecar runs %s", got.Image)
		}
	})

	t.Run("agent rewrites the actgate annotations", func(t *testing.T) {
		forbidden(t, "trust annotations patch by the agent", agentSA.Client.Patch(kctx(t), target(), forgedAnchors),
			"only actgate may change", "annotation "+inject.AnnotationAuthorityPublicKey)
		forbidden(t, "status annotation removal by the agent",
			agentSA.Client.Patch(kctx(t), target(), merge(fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, inject.AnnotationStatus))),
			"annotation "+inject.AnnotationStatus)
		forbidden(t, "opt-out label by the agent",
			agentSA.Client.Patch(kctx(t), target(), merge(fmt.Sprintf(`{"metadata":{"labels":{%q:"false"}}}`, inject.LabelInject))),
			"label "+inject.LabelInject)
		got := storedPod(t, e, ns, name)
		for _, k := range []string{inject.AnnotationAuthorityPublicKey, inject.AnnotationAuthorityCA} {
			if _, ok := got.Annotations[k]; ok {
				t.Errorf("the stored pod carries %s", k)
			}
		}
		if got.Annotations[inject.AnnotationStatus] != injected.Annotations[inject.AnnotationStatus] || got.Labels[inject.LabelInject] != "" {
			t.Errorf("status %q, label %q", got.Annotations[inject.AnnotationStatus], got.Labels[inject.LabelInject])
		}
	})

	t.Run("agent resizes the sidecar or changes its environment", func(t *testing.T) {
		resize := strategic(fmt.Sprintf(`{"spec":{"initContainers":[{"name":%q,"resources":{"requests":{"cpu":"1m"}}}]}}`, inject.SidecarName))
		err := agentSA.Client.SubResource("resize").Patch(kctx(t), target(), resize)
		forbidden(t, "sidecar resize by the agent", err, "only actgate may change", "resources")
		env := strategic(fmt.Sprintf(`{"spec":{"initContainers":[{"name":%q,"env":[{"name":"ACTGATE_AUTHORITY_PUBLIC_KEY","value":"forged"}]}]}}`, inject.SidecarName))
		if err := agentSA.Client.Patch(kctx(t), target(), env); err == nil {
			t.Fatal("the sidecar's environment was patched")
		}
		got := storedPod(t, e, ns, name)
		if key, ca := sidecarAnchors(t, got); key != wantKey || ca != wantCA {
			t.Fatalf("the sidecar now trusts key %q, CA %q", key, ca)
		}
		if fmt.Sprint(sidecarContainer(got).Resources) != fmt.Sprint(sidecarContainer(injected).Resources) {
			t.Fatalf("sidecar resources %v, were %v", sidecarContainer(got).Resources, sidecarContainer(injected).Resources)
		}
	})

	t.Run("agent mounts the sidecar's journal from an ephemeral container", func(t *testing.T) {
		p := storedPod(t, e, ns, name)
		p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: "debug", Image: "busybox", VolumeMounts: []corev1.VolumeMount{{Name: inject.VolumeJournal, MountPath: "/j"}}}})
		err := agentSA.Client.SubResource("ephemeralcontainers").Update(kctx(t), p)
		forbidden(t, "ephemeral container mounting the journal", err, "may not mount "+inject.VolumeJournal)
		if got := storedPod(t, e, ns, name); len(got.Spec.EphemeralContainers) != 0 {
			t.Fatalf("ephemeral containers %v", got.Spec.EphemeralContainers)
		}
	})

	t.Run("agent relabels its pod into another ToolPolicy", func(t *testing.T) {
		// The authority picks the governing policy by the caller's current labels.
		lax := governedPolicy(ns)
		lax.Name, lax.Spec.PodSelector.MatchLabels = "lax", map[string]string{"app": "lax-agent"}
		lax.Spec.Rules[0].Tools = []string{"*"}
		if err := e.Client.Create(kctx(t), lax); err != nil {
			t.Fatal(err)
		}
		forbidden(t, "relabel into the lax policy", agentSA.Client.Patch(kctx(t), target(), merge(`{"metadata":{"labels":{"app":"lax-agent"}}}`)),
			"only actgate may change", ns+"/payments → "+ns+"/lax")
		if got := storedPod(t, e, ns, name); got.Labels["app"] != "billing-agent" {
			t.Fatalf("labels %v", got.Labels)
		}
		// A label no policy reads stays the owner's.
		if err := agentSA.Client.Patch(kctx(t), target(), merge(`{"metadata":{"labels":{"team":"billing"}}}`)); err != nil {
			t.Fatalf("an unrelated label: %v", err)
		}
	})

	t.Run("the anchors do not follow the pod's annotations", func(t *testing.T) {
		// Even a writer the guard admits (actgate itself) changes nothing the sidecar trusts
		// by writing the annotations: the anchors are the sidecar's own environment.
		if err := manager.Client.Patch(kctx(t), target(), forgedAnchors); err != nil {
			t.Fatalf("actgate's annotation patch: %v", err)
		}
		got := storedPod(t, e, ns, name)
		if !strings.Contains(got.Annotations[inject.AnnotationAuthorityPublicKey], "attacker") {
			t.Fatalf("the annotation was not written: %v", got.Annotations)
		}
		if key, ca := sidecarAnchors(t, got); key != wantKey || ca != wantCA {
			t.Fatalf("after the annotation patch the sidecar trusts key %q, CA %q", key, ca)
		}
	})

	t.Run("actgate's own update passes", func(t *testing.T) {
		const next = "ghcr.io/actgate/actgate:v0.0.1-test"
		patch := strategic(fmt.Sprintf(`{"spec":{"initContainers":[{"name":%q,"image":%q}]}}`, inject.SidecarName, next))
		if err := manager.Client.Patch(kctx(t), target(), patch); err != nil {
			t.Fatalf("actgate's sidecar image update: %v", err)
		}
		if got := sidecarContainer(storedPod(t, e, ns, name)); got.Image != next {
			t.Fatalf("the sidecar runs %s", got.Image)
		}
	})

	t.Run("a pod actgate does not govern is its owner's", func(t *testing.T) {
		free := namespace(t, e, nil)
		owner := serviceAccountUser(t, e, free, "worker")
		grant(t, e, free, owner.Name, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"patch", "get"}}})
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: free, Name: "worker"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "work", Image: "registry.example/work:1"}}}}
		if err := e.Client.Create(kctx(t), pod); err != nil {
			t.Fatal(err)
		}
		patch := strategic(`{"metadata":{"labels":{"actgate.io/inject":"false"},"annotations":{"actgate.io/note":"mine"}},"spec":{"containers":[{"name":"work","image":"registry.example/work:2"}]}}`)
		if err := owner.Client.Patch(kctx(t), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: free, Name: "worker"}}, patch); err != nil {
			t.Fatalf("the owner's patch of an ungoverned pod: %v", err)
		}
		if got := storedPod(t, e, free, "worker"); got.Spec.Containers[0].Image != "registry.example/work:2" || got.Labels[inject.LabelInject] != "false" {
			t.Fatalf("stored %s %v", got.Spec.Containers[0].Image, got.Labels)
		}
	})
}

// actgateUser provisions actgate's manager identity with pods patch in ns.
func actgateUser(t *testing.T, e *envtest.Env, ns string) *envtest.User {
	t.Helper()
	u, err := e.AddUser(actgateManager, "system:serviceaccounts", "system:serviceaccounts:actgate-system")
	if err != nil {
		t.Fatal(err)
	}
	grant(t, e, ns, u.Name, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"patch", "get"}}})
	return u
}

func storedPod(t *testing.T, e *envtest.Env, ns, name string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{}
	if err := e.Client.Get(kctx(t), client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
		t.Fatal(err)
	}
	return p
}

func sidecarContainer(p *corev1.Pod) *corev1.Container {
	for i := range p.Spec.InitContainers {
		if p.Spec.InitContainers[i].Name == inject.SidecarName {
			return &p.Spec.InitContainers[i]
		}
	}
	return &corev1.Container{}
}

// authorityAnchors are the public key and CA the harness's injector gives every sidecar.
func authorityAnchors(t *testing.T, root string) (key, ca string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "webhook/testdata/authority-ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if key, err = webhook.PublicKeysPEM(raw); err != nil {
		t.Fatal(err)
	}
	return key, string(raw)
}

// sidecarAnchors is what the sidecar of pod reads as the authority's public key and CA, the
// way the kubelet would give them to it: the inline variables (ACTGATE_AUTHORITY_PUBLIC_KEY,
// ACTGATE_AUTHORITY_CA), or the files the *_FILE variables name, resolved through the
// sidecar's mounts to downwardAPI items of the pod's current annotations.
func sidecarAnchors(t *testing.T, pod *corev1.Pod) (key, ca string) {
	t.Helper()
	side := sidecarContainer(pod)
	env := map[string]string{}
	for _, v := range side.Env {
		if v.ValueFrom == nil {
			env[v.Name] = v.Value
		}
	}
	file := func(path string) string {
		for _, m := range side.VolumeMounts {
			rel, ok := strings.CutPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/")
			if !ok {
				continue
			}
			for _, v := range pod.Spec.Volumes {
				if v.Name != m.Name || v.DownwardAPI == nil {
					continue
				}
				for _, it := range v.DownwardAPI.Items {
					if it.Path == rel && it.FieldRef != nil {
						k, ok := strings.CutPrefix(it.FieldRef.FieldPath, "metadata.annotations['")
						if !ok {
							t.Fatalf("unsupported downward API field %s", it.FieldRef.FieldPath)
						}
						return pod.Annotations[strings.TrimSuffix(k, "']")]
					}
				}
			}
		}
		t.Fatalf("the sidecar's file %s comes from no downwardAPI item", path)
		return ""
	}
	anchor := func(inline, path string) string {
		if v, ok := env[inline]; ok {
			return v
		}
		if p, ok := env[path]; ok {
			return file(p)
		}
		return ""
	}
	return anchor("ACTGATE_AUTHORITY_PUBLIC_KEY", "ACTGATE_AUTHORITY_PUBLIC_KEY_FILE"), anchor("ACTGATE_AUTHORITY_CA", "ACTGATE_AUTHORITY_CA_FILE")
}
