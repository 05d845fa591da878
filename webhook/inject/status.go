package inject

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
)

// StatusVersion is the version of the Status annotation format.
const StatusVersion = "v1"

// Status is the actgate.io/status annotation: what one injection did, enough to undo it
// (Strip) so that injecting again gives the same pod (Istio's sidecar.istio.io/status and
// Linkerd's linkerd.io/proxy-version play the same part).
type Status struct {
	// Version is StatusVersion.
	Version string `json:"version"`
	// Policies are the selecting ToolPolicies as namespace/name.
	Policies []string `json:"policies"`
	// Servers are the protected servers the sidecar fronts.
	Servers []string `json:"servers"`
	// InitContainers, Containers, Volumes and Annotations are the names the injector added.
	InitContainers []string `json:"initContainers,omitempty"`
	Containers     []string `json:"containers,omitempty"`
	Volumes        []string `json:"volumes,omitempty"`
	Annotations    []string `json:"annotations,omitempty"`
	// Changes are the edits to the pod's own containers, in container order.
	Changes []ContainerChange `json:"changes,omitempty"`
}

// ContainerChange records the edits to one agent container (or init container).
type ContainerChange struct {
	// Container is the container's name (unique across init and regular containers).
	Container string `json:"container"`
	// Env are the variables set to a sidecar URL, with what they were before.
	Env []EnvChange `json:"env,omitempty"`
	// MovedEnv, MovedEnvFrom and MovedVolumeMounts are credential references removed from the
	// container (and given to the sidecar), kept whole so Strip can put them back.
	MovedEnv          []corev1.EnvVar        `json:"movedEnv,omitempty"`
	MovedEnvFrom      []corev1.EnvFromSource `json:"movedEnvFrom,omitempty"`
	MovedVolumeMounts []corev1.VolumeMount   `json:"movedVolumeMounts,omitempty"`
}

// EnvChange is one variable the injector set.
type EnvChange struct {
	// Name of the variable.
	Name string `json:"name"`
	// Original is the variable before injection; nil when the injector added it.
	Original *corev1.EnvVar `json:"original,omitempty"`
}

// StatusOf reads the status annotation of pod. ok is false when there is none or it does not
// parse as a Status of this version.
func StatusOf(pod *corev1.Pod) (s *Status, ok bool) {
	raw, present := pod.Annotations[AnnotationStatus]
	if !present {
		return nil, false
	}
	s = &Status{}
	if err := json.Unmarshal([]byte(raw), s); err != nil || s.Version != StatusVersion {
		return nil, false
	}
	return s, true
}
