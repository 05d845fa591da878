package inject

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// ReservedPrefix starts the name of every container and volume the injector adds (the sidecar
// template's names must carry it, see merge). A pod's author may not use it for a container,
// an init or ephemeral container, a volume, or a volume mount (CheckAuthored): what is trusted
// in a pod is decided by what the injector added, never by a name the author chose
// (docs/security.md "What a pod's author can and cannot do").
const ReservedPrefix = "actgate-"

// Reserved reports whether name is one the injector reserves for its own containers and volumes.
func Reserved(name string) bool { return strings.HasPrefix(name, ReservedPrefix) }

// CheckAuthored refuses (ErrNotInjectable) a pod, as its author wrote it, that uses what only the
// injector may add:
//
//   - a container, init container or ephemeral container named actgate-…;
//   - a volume named actgate-…, or a volume mount or device of one in any container (the
//     injector adds its token, credentials and journal volumes under those names, so a mount
//     written by the author would reach them);
//   - a projected service-account token for the authority's audience (cfg.AuthorityAudience):
//     that token is the sidecar's identity toward the authority service;
//   - the actgate.io/status annotation (the injector's record of what it added).
//
// Inject calls it on the pod with any previous injection stripped; the pod handler calls it on
// a candidate pod that no ToolPolicy selects.
func CheckAuthored(pod *corev1.Pod, cfg *Config) error {
	if _, ok := pod.Annotations[AnnotationStatus]; ok {
		return fmt.Errorf("%w: the pod carries the %s annotation, which only the injector writes; remove it", ErrNotInjectable, AnnotationStatus)
	}
	check := func(kind, name string, mounts []corev1.VolumeMount, devices []corev1.VolumeDevice) error {
		if Reserved(name) {
			return fmt.Errorf("%w: %s %q: names starting with %q are reserved for what the actgate injector adds; rename it",
				ErrNotInjectable, kind, name, ReservedPrefix)
		}
		for _, m := range mounts {
			if Reserved(m.Name) {
				return fmt.Errorf("%w: %s %q mounts volume %q: volumes named %s… are the actgate sidecar's own and only it mounts them",
					ErrNotInjectable, kind, name, m.Name, ReservedPrefix)
			}
		}
		for _, d := range devices {
			if Reserved(d.Name) {
				return fmt.Errorf("%w: %s %q uses volume %q as a device: volumes named %s… are the actgate sidecar's own",
					ErrNotInjectable, kind, name, d.Name, ReservedPrefix)
			}
		}
		return nil
	}
	for _, c := range pod.Spec.InitContainers {
		if err := check("init container", c.Name, c.VolumeMounts, c.VolumeDevices); err != nil {
			return err
		}
	}
	for _, c := range pod.Spec.Containers {
		if err := check("container", c.Name, c.VolumeMounts, c.VolumeDevices); err != nil {
			return err
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if err := check("ephemeral container", c.Name, c.VolumeMounts, c.VolumeDevices); err != nil {
			return err
		}
	}
	for _, v := range pod.Spec.Volumes {
		if Reserved(v.Name) {
			return fmt.Errorf("%w: volume %q: names starting with %q are reserved for the actgate sidecar's volumes; rename it",
				ErrNotInjectable, v.Name, ReservedPrefix)
		}
		if v.Projected == nil || cfg == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if t := src.ServiceAccountToken; t != nil && t.Audience == cfg.AuthorityAudience {
				return fmt.Errorf("%w: volume %q projects a service-account token for audience %q, the actgate authority's: only the sidecar holds that identity",
					ErrNotInjectable, v.Name, t.Audience)
			}
		}
	}
	return nil
}

// carriesInjection: the pod carries a status annotation or a container or volume under a reserved
// name, so it is either the injector's own output seen again or a pod whose author wrote them.
func carriesInjection(pod *corev1.Pod) bool {
	if _, ok := pod.Annotations[AnnotationStatus]; ok {
		return true
	}
	reservedC := func(c corev1.Container) bool { return Reserved(c.Name) }
	return slices.ContainsFunc(pod.Spec.InitContainers, reservedC) || slices.ContainsFunc(pod.Spec.Containers, reservedC) ||
		slices.ContainsFunc(pod.Spec.EphemeralContainers, func(c corev1.EphemeralContainer) bool { return Reserved(c.Name) }) ||
		slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return Reserved(v.Name) })
}

// sameInjection checks that the reserved parts pod carries are exactly those of out, the
// injection of pod stripped (st its status): the same containers, init containers and volumes
// named actgate-…, each equal up to the defaults the API server fills in (a webhook's output is
// defaulted before the webhook is invoked again). Anything else is refused, so parts the pod's
// author wrote are never silently dropped or kept.
func sameInjection(pod, out *corev1.Pod, st *Status) error {
	refuse := func(what string) error {
		return fmt.Errorf("%w: the pod carries %s that the actgate injector did not add (names starting with %q and the %s annotation are reserved for it); remove it",
			ErrNotInjectable, what, ReservedPrefix, AnnotationStatus)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if Reserved(c.Name) {
			return refuse(fmt.Sprintf("ephemeral container %q", c.Name))
		}
	}
	missing := func(what string) error {
		return fmt.Errorf("%w: the pod carries the %s annotation but not the %s the injector adds: the annotation is not the injector's; remove it",
			ErrNotInjectable, AnnotationStatus, what)
	}
	compare := func(kind string, added []string, have, want []corev1.Container) error {
		for _, c := range have {
			if !Reserved(c.Name) {
				continue
			}
			c = withoutServiceAccountMount(pod, c)
			w := FindContainer(want, c.Name)
			if w == nil || !slices.Contains(added, c.Name) || !equality.Semantic.DeepEqual(normalContainer(c), normalContainer(*w)) {
				return refuse(fmt.Sprintf("%s %q", kind, c.Name))
			}
		}
		return nil
	}
	if err := compare("init container", st.InitContainers, pod.Spec.InitContainers, out.Spec.InitContainers); err != nil {
		return err
	}
	if err := compare("container", st.Containers, pod.Spec.Containers, out.Spec.Containers); err != nil {
		return err
	}
	for _, v := range pod.Spec.Volumes {
		if !Reserved(v.Name) {
			continue
		}
		i := slices.IndexFunc(out.Spec.Volumes, func(w corev1.Volume) bool { return w.Name == v.Name })
		if i < 0 || !slices.Contains(st.Volumes, v.Name) || !equality.Semantic.DeepEqual(normalVolume(v), normalVolume(out.Spec.Volumes[i])) {
			return refuse(fmt.Sprintf("volume %q", v.Name))
		}
	}
	for _, name := range st.InitContainers {
		if FindContainer(pod.Spec.InitContainers, name) == nil {
			return missing(fmt.Sprintf("init container %q", name))
		}
	}
	for _, name := range st.Containers {
		if FindContainer(pod.Spec.Containers, name) == nil {
			return missing(fmt.Sprintf("container %q", name))
		}
	}
	for _, name := range st.Volumes {
		if !slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == name }) {
			return missing(fmt.Sprintf("volume %q", name))
		}
	}
	return nil
}

// ServiceAccountMountPath is where the API server's ServiceAccount admission plugin mounts the
// pod's API token into every container (its kube-api-access-… volume).
const ServiceAccountMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"

// withoutServiceAccountMount is c without the mount the ServiceAccount admission plugin adds to
// every container, the injected sidecar included, when the API server reruns its mutating
// plugins before reinvoking the webhook: a read-only mount at ServiceAccountMountPath of a
// kube-api-access-… volume that projects the API server's own token (no audience). Any other
// extra mount keeps the container unequal to the injector's.
func withoutServiceAccountMount(pod *corev1.Pod, c corev1.Container) corev1.Container {
	i := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		if !strings.HasPrefix(m.Name, "kube-api-access-") || m.MountPath != ServiceAccountMountPath || !m.ReadOnly || m.SubPath != "" || m.SubPathExpr != "" {
			return false
		}
		for _, v := range pod.Spec.Volumes {
			if v.Name != m.Name || v.Projected == nil {
				continue
			}
			return slices.ContainsFunc(v.Projected.Sources, func(s corev1.VolumeProjection) bool {
				return s.ServiceAccountToken != nil && s.ServiceAccountToken.Audience == ""
			})
		}
		return false
	})
	if i < 0 {
		return c
	}
	c = *c.DeepCopy()
	c.VolumeMounts = slices.Delete(c.VolumeMounts, i, i+1)
	if len(c.VolumeMounts) == 0 {
		c.VolumeMounts = nil
	}
	return c
}

// FindContainer returns the container of cs named name, nil when there is none.
func FindContainer(cs []corev1.Container, name string) *corev1.Container {
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	return nil
}

// The API server's defaults for the fields the sidecar template leaves unset (k8s.io/api
// core/v1 field documentation).
const (
	defaultTerminationMessagePath = "/dev/termination-log"
	defaultMode                   = int32(0o644)
	defaultTokenExpiration        = int64(3600)
)

// normalContainer is c with every field the API server defaults cleared when it holds its
// default, and requests filled from limits as the API server fills them, so the injector's
// rendered container and the same container after defaulting compare equal.
func normalContainer(c corev1.Container) corev1.Container {
	c = *c.DeepCopy()
	if c.TerminationMessagePath == defaultTerminationMessagePath {
		c.TerminationMessagePath = ""
	}
	if c.TerminationMessagePolicy == corev1.TerminationMessageReadFile {
		c.TerminationMessagePolicy = ""
	}
	for i := range c.Env {
		if f := c.Env[i].ValueFrom; f != nil && f.FieldRef != nil && f.FieldRef.APIVersion == "v1" {
			f.FieldRef.APIVersion = ""
		}
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == corev1.ProtocolTCP {
			c.Ports[i].Protocol = ""
		}
	}
	for _, p := range []*corev1.Probe{c.StartupProbe, c.ReadinessProbe, c.LivenessProbe} {
		if p == nil {
			continue
		}
		clear := func(v *int32, def int32) {
			if *v == def {
				*v = 0
			}
		}
		clear(&p.TimeoutSeconds, 1)
		clear(&p.PeriodSeconds, 10)
		clear(&p.SuccessThreshold, 1)
		clear(&p.FailureThreshold, 3)
		if p.HTTPGet != nil && p.HTTPGet.Scheme == corev1.URISchemeHTTP {
			p.HTTPGet.Scheme = ""
		}
	}
	for k, v := range c.Resources.Limits {
		if _, ok := c.Resources.Requests[k]; !ok {
			if c.Resources.Requests == nil {
				c.Resources.Requests = corev1.ResourceList{}
			}
			c.Resources.Requests[k] = v
		}
	}
	c.ResizePolicy = slices.DeleteFunc(c.ResizePolicy, func(p corev1.ContainerResizePolicy) bool {
		return p.RestartPolicy == corev1.NotRequired
	})
	if len(c.ResizePolicy) == 0 {
		c.ResizePolicy = nil
	}
	return c
}

// normalVolume is v with the defaulted modes and token expiry cleared when they hold their
// default (see normalContainer).
func normalVolume(v corev1.Volume) corev1.Volume {
	v = *v.DeepCopy()
	mode := func(m **int32) {
		if *m != nil && **m == defaultMode {
			*m = nil
		}
	}
	if v.Projected != nil {
		mode(&v.Projected.DefaultMode)
		for _, s := range v.Projected.Sources {
			if t := s.ServiceAccountToken; t != nil && t.ExpirationSeconds != nil && *t.ExpirationSeconds == defaultTokenExpiration {
				t.ExpirationSeconds = nil
			}
		}
	}
	if v.Secret != nil {
		mode(&v.Secret.DefaultMode)
	}
	if v.ConfigMap != nil {
		mode(&v.ConfigMap.DefaultMode)
	}
	if v.DownwardAPI != nil {
		mode(&v.DownwardAPI.DefaultMode)
	}
	if v.HostPath != nil && v.HostPath.Type != nil && *v.HostPath.Type == corev1.HostPathUnset {
		v.HostPath.Type = nil
	}
	return v
}
