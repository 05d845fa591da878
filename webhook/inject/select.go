package inject

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/actgate/actgate/api/v1alpha1"
)

// Select returns the ToolPolicies, among policies, whose spec.podSelector selects pod: same
// namespace, labels matching; an empty selector selects every pod (ToolPolicySpec.PodSelector).
// A policy being deleted still counts until it is gone (fail closed).
// The result is sorted by name. A policy whose selector does not parse is an error: whether it
// selects the pod is unknown, and the caller fails closed.
func Select(pod *corev1.Pod, policies []v1alpha1.ToolPolicy) ([]v1alpha1.ToolPolicy, error) {
	var out []v1alpha1.ToolPolicy
	set := labels.Set(pod.Labels)
	for i := range policies {
		p := &policies[i]
		if p.Namespace != pod.Namespace {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
		if err != nil {
			return nil, fmt.Errorf("%w: ToolPolicy %s/%s: spec.podSelector: %w", ErrPolicy, p.Namespace, p.Name, err)
		}
		if sel.Matches(set) {
			out = append(out, *p)
		}
	}
	slices.SortFunc(out, func(a, b v1alpha1.ToolPolicy) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// CredentialSecrets returns the names of the Secrets the policies' servers name in
// credentialsSecretRef: the Secrets only a sidecar may hold.
func CredentialSecrets(policies []v1alpha1.ToolPolicy) map[string]bool {
	out := map[string]bool{}
	for i := range policies {
		for _, s := range policies[i].Spec.Servers {
			for _, c := range credentialRefs(s) {
				out[c.ref.Name] = true
			}
		}
	}
	return out
}

// CredentialReference is one place a container refers to a credential Secret.
type CredentialReference struct {
	// Container is the container's name.
	Container string
	// Secret is the Secret referred to.
	Secret string
	// Via is how: "env NAME", "envFrom", or "volumeMount NAME".
	Via string
}

func (r CredentialReference) String() string {
	return fmt.Sprintf("container %s refers to credential Secret %s (%s)", r.Container, r.Secret, r.Via)
}

// CredentialReferences lists where containers (init, regular and ephemeral, whatever their
// names) refer to one of secrets: an env valueFrom.secretKeyRef, an envFrom secretRef, or a
// mount of a pod volume that projects one. The pod handler refuses such a pod when it is not
// injected, and an ephemeral container that adds one (anti-bypass). No name exempts a
// container: a container of the pod's author may be named like the sidecar, so the injected
// sidecar is told apart by the caller from what the injector recorded, never here.
func CredentialReferences(pod *corev1.Pod, secrets map[string]bool) []CredentialReference {
	if len(secrets) == 0 {
		return nil
	}
	vols := credentialVolumes(pod, secrets)
	var out []CredentialReference
	check := func(name string, env []corev1.EnvVar, envFrom []corev1.EnvFromSource, mounts []corev1.VolumeMount) {
		for _, e := range env {
			if s := envSecret(e); secrets[s] {
				out = append(out, CredentialReference{name, s, "env " + e.Name})
			}
		}
		for _, ef := range envFrom {
			if ef.SecretRef != nil && secrets[ef.SecretRef.Name] {
				out = append(out, CredentialReference{name, ef.SecretRef.Name, "envFrom"})
			}
		}
		for _, m := range mounts {
			if s, ok := vols[m.Name]; ok {
				out = append(out, CredentialReference{name, s, "volumeMount " + m.Name})
			}
		}
	}
	for _, c := range pod.Spec.InitContainers {
		check(c.Name, c.Env, c.EnvFrom, c.VolumeMounts)
	}
	for _, c := range pod.Spec.Containers {
		check(c.Name, c.Env, c.EnvFrom, c.VolumeMounts)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		check(c.Name, c.Env, c.EnvFrom, c.VolumeMounts)
	}
	return out
}

// credentialVolumes maps the names of pod volumes that carry a credential Secret (a secret
// volume, or a projected volume with a secret source) to that Secret.
func credentialVolumes(pod *corev1.Pod, secrets map[string]bool) map[string]string {
	out := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.Secret != nil && secrets[v.Secret.SecretName]:
			out[v.Name] = v.Secret.SecretName
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				if src.Secret != nil && secrets[src.Secret.Name] {
					out[v.Name] = src.Secret.Name
					break
				}
			}
		}
	}
	return out
}

func envSecret(e corev1.EnvVar) string {
	if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
		return e.ValueFrom.SecretKeyRef.Name
	}
	return ""
}
