package inject_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actgate/actgate/webhook/inject"
)

// TestInjectRequiredTruthTable walks the table in InjectRequired's comment row by row, then the
// notes (invalid values, label beats annotation).
func TestInjectRequiredTruthTable(t *testing.T) {
	cfg := &inject.Config{ExemptNamespaces: []string{"kube-system"}, OptOutNamespaces: []string{"sandbox"}}
	const absent = "<absent>"
	for _, tc := range []struct {
		name       string
		ns         string // namespace name
		nsValue    string // namespace label, absent = no label
		podLabel   string
		podAnnot   string
		want       bool
		wantReason []inject.Reason
	}{
		// exempt  -  -  -  → no
		{"exempt namespace even when labelled true", "kube-system", "true", "true", absent, false, []inject.Reason{inject.ReasonNamespaceExempt}},
		{"exempt namespace, nothing set", "kube-system", absent, absent, absent, false, []inject.Reason{inject.ReasonNamespaceExempt}},
		// ns false → no, whatever the pod says
		{"namespace false, pod true", "agents", "false", "true", absent, false, []inject.Reason{inject.ReasonNamespaceDisabled}},
		{"namespace false, pod absent", "agents", "false", absent, absent, false, []inject.Reason{inject.ReasonNamespaceDisabled}},
		// ns true, pod false, opt-out allowed → no
		{"namespace true, pod opts out where allowed", "sandbox", "true", "false", absent, false, []inject.Reason{inject.ReasonPodOptedOut}},
		{"namespace true, pod opts out by annotation where allowed", "sandbox", "true", absent, "false", false, []inject.Reason{inject.ReasonPodOptedOut}},
		// ns true, pod false, opt-out not allowed → yes
		{"namespace true, pod opt-out ignored", "agents", "true", "false", absent, true, []inject.Reason{inject.ReasonNamespaceEnabled, inject.ReasonOptOutIgnored}},
		{"namespace true, pod annotation opt-out ignored", "agents", "true", absent, "false", true, []inject.Reason{inject.ReasonNamespaceEnabled, inject.ReasonOptOutIgnored}},
		// ns true, pod true / absent → yes
		{"namespace true, pod true", "agents", "true", "true", absent, true, []inject.Reason{inject.ReasonNamespaceEnabled}},
		{"namespace true, pod absent", "agents", "true", absent, absent, true, []inject.Reason{inject.ReasonNamespaceEnabled}},
		{"namespace true in the opt-out namespace, pod absent", "sandbox", "true", absent, absent, true, []inject.Reason{inject.ReasonNamespaceEnabled}},
		// ns absent, pod true → yes
		{"namespace absent, pod label true", "agents", absent, "true", absent, true, []inject.Reason{inject.ReasonPodEnabled}},
		{"namespace absent, pod annotation true", "agents", absent, absent, "true", true, []inject.Reason{inject.ReasonPodEnabled}},
		// ns absent, pod false / absent → no
		{"namespace absent, pod false", "agents", absent, "false", absent, false, []inject.Reason{inject.ReasonNotEnabled}},
		{"nothing set", "agents", absent, absent, absent, false, []inject.Reason{inject.ReasonNotEnabled}},

		// Only "true" and "false" are values.
		{"namespace value True is invalid", "agents", "True", absent, absent, false, []inject.Reason{inject.ReasonNotEnabled, inject.ReasonInvalidNamespaceValue}},
		{"namespace value yes is invalid, pod true still opts in", "agents", "yes", "true", absent, true, []inject.Reason{inject.ReasonPodEnabled, inject.ReasonInvalidNamespaceValue}},
		{"pod label enabled is invalid", "agents", absent, "enabled", absent, false, []inject.Reason{inject.ReasonNotEnabled, inject.ReasonInvalidPodValue}},
		{"invalid pod label falls back to the annotation", "agents", absent, "1", "true", true, []inject.Reason{inject.ReasonPodEnabled, inject.ReasonInvalidPodValue}},
		{"empty value is invalid", "agents", "", absent, absent, false, []inject.Reason{inject.ReasonNotEnabled, inject.ReasonInvalidNamespaceValue}},
		// Label beats annotation.
		{"label false beats annotation true", "agents", absent, "false", "true", false, []inject.Reason{inject.ReasonNotEnabled, inject.ReasonLabelBeatsAnnotation}},
		{"label true beats annotation false", "agents", absent, "true", "false", true, []inject.Reason{inject.ReasonPodEnabled, inject.ReasonLabelBeatsAnnotation}},
		{"label false beats annotation true where opt-out is allowed", "sandbox", "true", "false", "true", false, []inject.Reason{inject.ReasonPodOptedOut, inject.ReasonLabelBeatsAnnotation}},
		{"label true beats annotation false where opt-out is allowed", "sandbox", "true", "true", "false", true, []inject.Reason{inject.ReasonNamespaceEnabled, inject.ReasonLabelBeatsAnnotation}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tc.ns}}
			if tc.nsValue != absent {
				ns.Labels = map[string]string{inject.LabelInject: tc.nsValue}
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: tc.ns}}
			if tc.podLabel != absent {
				pod.Labels = map[string]string{inject.LabelInject: tc.podLabel}
			}
			if tc.podAnnot != absent {
				pod.Annotations = map[string]string{inject.LabelInject: tc.podAnnot}
			}
			got, reasons := inject.InjectRequired(pod, ns, cfg)
			if got != tc.want || !slices.Equal(reasons, tc.wantReason) {
				t.Errorf("InjectRequired = %v %v, want %v %v", got, reasons, tc.want, tc.wantReason)
			}
		})
	}
}

func TestInjectRequiredWithoutNamespaceAnswersFromThePod(t *testing.T) {
	cfg := &inject.Config{ExemptNamespaces: []string{"kube-system"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Labels: map[string]string{inject.LabelInject: "true"}}}
	if ok, r := inject.InjectRequired(pod, nil, cfg); ok || r[0] != inject.ReasonNamespaceExempt {
		t.Errorf("exempt by the pod's namespace: %v %v", ok, r)
	}
	pod.Namespace = "agents"
	if ok, r := inject.InjectRequired(pod, nil, cfg); !ok || r[0] != inject.ReasonPodEnabled {
		t.Errorf("pod opt-in: %v %v", ok, r)
	}
}
