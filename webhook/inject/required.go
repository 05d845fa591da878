package inject

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// Reason says why InjectRequired decided as it did, or what it noticed and ignored. Reasons are
// the Event reasons and audit-annotation values of a skipped pod, so they are CamelCase and
// stable.
type Reason string

// Reasons. The first group decides; the second is noticed on the way and never decides alone.
const (
	// ReasonNamespaceEnabled: the namespace carries actgate.io/inject: "true".
	ReasonNamespaceEnabled Reason = "NamespaceEnabled"
	// ReasonPodEnabled: the namespace does not opt in, the pod does (label, else annotation).
	ReasonPodEnabled Reason = "PodEnabled"
	// ReasonNamespaceExempt: the namespace is in Config.ExemptNamespaces (the chart's
	// webhook.exemptNamespaces): never injected, whatever it or the pod says.
	ReasonNamespaceExempt Reason = "NamespaceExempt"
	// ReasonNamespaceDisabled: the namespace carries actgate.io/inject: "false". Setting that
	// label is guarded (see webhook.NamespaceGuard); a pod cannot override it.
	ReasonNamespaceDisabled Reason = "NamespaceDisabled"
	// ReasonPodOptedOut: the pod says "false" and its namespace is in Config.OptOutNamespaces,
	// the only namespaces where a pod's opt-out is honoured.
	ReasonPodOptedOut Reason = "PodOptedOut"
	// ReasonNotEnabled: neither the namespace nor the pod opts in.
	ReasonNotEnabled Reason = "NotEnabled"
	// ReasonNoPolicy: the pod is a candidate but no ToolPolicy of its namespace selects it
	// (decided by the caller with Select, after InjectRequired).
	ReasonNoPolicy Reason = "NoToolPolicy"

	// ReasonOptOutIgnored: the pod says "false" in a namespace where opting out is not
	// allowed; it is injected anyway (anti-bypass: whoever writes the pod spec is not who
	// decides whether its tool calls are governed).
	ReasonOptOutIgnored Reason = "OptOutIgnored"
	// ReasonInvalidNamespaceValue: the namespace label is neither "true" nor "false"; it is
	// treated as absent.
	ReasonInvalidNamespaceValue Reason = "InvalidNamespaceValue"
	// ReasonInvalidPodValue: the pod's label or annotation is neither "true" nor "false"; that
	// one is treated as absent.
	ReasonInvalidPodValue Reason = "InvalidPodValue"
	// ReasonLabelBeatsAnnotation: the pod has both a valid label and a valid annotation that
	// disagree; the label decides.
	ReasonLabelBeatsAnnotation Reason = "LabelBeatsAnnotation"
)

// setting is a parsed actgate.io/inject value.
type setting int

const (
	unset setting = iota
	on
	off
	invalid
)

// parse accepts exactly "true" and "false" (Istio and Linkerd accept the same two spellings
// and nothing else: "yes", "True" and "enabled" are invalid, not truthy).
func parse(v string, present bool) setting {
	switch {
	case !present:
		return unset
	case v == "true":
		return on
	case v == "false":
		return off
	}
	return invalid
}

// InjectRequired decides from labels and annotations alone whether pod, being created in ns,
// is a candidate for the sidecar. It is pure. The caller still needs a ToolPolicy selecting the
// pod (Select) before injecting; a candidate that no policy selects is skipped with
// ReasonNoPolicy.
//
// ns may be nil when the namespace could not be read; the caller must then fail closed (the
// pod handler denies the pod rather than guess). With a nil ns InjectRequired answers from the
// pod alone.
//
// Truth table. "ns" is the namespace's actgate.io/inject label, "pod" the pod's effective value
// (its label when that is "true" or "false", else its annotation when that is, else absent),
// "exempt" the namespace is in Config.ExemptNamespaces, "opt-out ok" it is in
// Config.OptOutNamespaces; "-" is any value, "absent" includes an invalid value:
//
//	exempt  ns      pod     opt-out ok  inject  reason
//	yes     -       -       -           no      NamespaceExempt
//	no      false   -       -           no      NamespaceDisabled
//	no      true    false   yes         no      PodOptedOut
//	no      true    false   no          yes     NamespaceEnabled, OptOutIgnored
//	no      true    true    -           yes     NamespaceEnabled
//	no      true    absent  -           yes     NamespaceEnabled
//	no      absent  true    -           yes     PodEnabled
//	no      absent  false   -           no      NotEnabled
//	no      absent  absent  -           no      NotEnabled
//
// The deciding reason comes first in the returned list; InvalidNamespaceValue,
// InvalidPodValue and LabelBeatsAnnotation follow when they apply.
func InjectRequired(pod *corev1.Pod, ns *corev1.Namespace, cfg *Config) (bool, []Reason) {
	var notes []Reason
	nsName := pod.Namespace
	nsSetting := unset
	if ns != nil {
		nsName = ns.Name
		v, ok := ns.Labels[LabelInject]
		if nsSetting = parse(v, ok); nsSetting == invalid {
			notes = append(notes, ReasonInvalidNamespaceValue)
			nsSetting = unset
		}
	}

	lv, lok := pod.Labels[LabelInject]
	av, aok := pod.Annotations[LabelInject]
	label, annotation := parse(lv, lok), parse(av, aok)
	if label == invalid || annotation == invalid {
		notes = append(notes, ReasonInvalidPodValue)
	}
	podSetting := unset
	switch {
	case label == on || label == off: // label beats annotation (Istio's precedence)
		podSetting = label
		if (annotation == on || annotation == off) && annotation != label {
			notes = append(notes, ReasonLabelBeatsAnnotation)
		}
	case annotation == on || annotation == off:
		podSetting = annotation
	}

	decide := func(ok bool, r Reason, extra ...Reason) (bool, []Reason) {
		return ok, append(append([]Reason{r}, extra...), notes...)
	}
	switch {
	case slices.Contains(cfg.ExemptNamespaces, nsName):
		return decide(false, ReasonNamespaceExempt)
	case nsSetting == off:
		return decide(false, ReasonNamespaceDisabled)
	case nsSetting == on && podSetting == off && slices.Contains(cfg.OptOutNamespaces, nsName):
		return decide(false, ReasonPodOptedOut)
	case nsSetting == on && podSetting == off:
		return decide(true, ReasonNamespaceEnabled, ReasonOptOutIgnored)
	case nsSetting == on:
		return decide(true, ReasonNamespaceEnabled)
	case podSetting == on:
		return decide(true, ReasonPodEnabled)
	}
	return decide(false, ReasonNotEnabled)
}
