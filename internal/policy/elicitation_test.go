package policy

import (
	"errors"
	"strings"
	"testing"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/act"
)

// TestElicitationCompile: spec.elicitation accepts INFORMATIONAL only; every class for which
// envelope-04 §12.4 requires the principal's own surface is refused with the field named.
func TestElicitationCompile(t *testing.T) {
	cases := []struct {
		name    string
		classes []v1alpha1.ConsequenceClass
		field   string // "" = compiles
	}{
		{"informational", []v1alpha1.ConsequenceClass{v1alpha1.ConsequenceInformational}, ""},
		{"financial", []v1alpha1.ConsequenceClass{v1alpha1.ConsequenceFinancial}, "spec.elicitation.classes[0]"},
		{"network control (permissions, deploys)", []v1alpha1.ConsequenceClass{v1alpha1.ConsequenceNetworkControl}, "spec.elicitation.classes[0]"},
		{"communication", []v1alpha1.ConsequenceClass{v1alpha1.ConsequenceCommunication}, "spec.elicitation.classes[0]"},
		{"data disclosure (computer use)", []v1alpha1.ConsequenceClass{v1alpha1.ConsequenceDataDisclosure}, "spec.elicitation.classes[0]"},
		{"persistent state change (destructive)", []v1alpha1.ConsequenceClass{v1alpha1.ConsequencePersistentStateChange}, "spec.elicitation.classes[0]"},
		{"physical", []v1alpha1.ConsequenceClass{v1alpha1.ConsequencePhysical}, "spec.elicitation.classes[0]"},
		{"other", []v1alpha1.ConsequenceClass{v1alpha1.ConsequenceOther}, "spec.elicitation.classes[0]"},
		{"allowed then refused", []v1alpha1.ConsequenceClass{"INFORMATIONAL", "FINANCIAL"}, "spec.elicitation.classes[1]"},
		{"duplicate", []v1alpha1.ConsequenceClass{"INFORMATIONAL", "INFORMATIONAL"}, "spec.elicitation.classes[1]"},
		{"unknown", []v1alpha1.ConsequenceClass{"MONEY"}, "spec.elicitation.classes[0]"},
		{"empty", []v1alpha1.ConsequenceClass{}, "spec.elicitation.classes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec := sampleSpec(t)
			spec.Elicitation = &v1alpha1.ElicitationPolicy{Classes: c.classes}
			compiled, err := Compile("shop/payments", spec, 1)
			if c.field == "" {
				if err != nil {
					t.Fatal(err)
				}
				if !compiled.ElicitationAllowed(act.ClassInformational) || compiled.ElicitationAllowed(act.ClassFinancial) {
					t.Error("ElicitationAllowed disagrees with the spec")
				}
				return
			}
			var ce *CompileError
			if !errors.As(err, &ce) {
				t.Fatalf("err %v, want a CompileError", err)
			}
			found := false
			for _, p := range ce.Problems {
				found = found || p.Field == c.field
			}
			if !found {
				t.Errorf("no problem at %s: %v", c.field, err)
			}
			if c.name == "financial" && !strings.Contains(err.Error(), "§12.4") {
				t.Errorf("the refusal does not say why: %v", err)
			}
		})
	}
}

func TestElicitationAllowed(t *testing.T) {
	plain := compileSample(t, nil)
	withField := compileSample(t, func(s *v1alpha1.ToolPolicySpec) {
		s.Elicitation = &v1alpha1.ElicitationPolicy{Classes: []v1alpha1.ConsequenceClass{"INFORMATIONAL"}}
	})
	audit := compileSample(t, func(s *v1alpha1.ToolPolicySpec) {
		s.Mode = v1alpha1.PolicyModeAudit
		s.Elicitation = &v1alpha1.ElicitationPolicy{Classes: []v1alpha1.ConsequenceClass{"INFORMATIONAL"}}
	})
	var nilPolicy *Compiled
	cases := []struct {
		name string
		c    *Compiled
		cl   act.ConsequenceClass
		want bool
	}{
		{"omitted field", plain, act.ClassInformational, false},
		{"listed", withField, act.ClassInformational, true},
		{"not listed", withField, act.ClassFinancial, false},
		{"empty class", withField, "", false},
		{"audit mode", audit, act.ClassInformational, false},
		{"nil policy", nilPolicy, act.ClassInformational, false},
	}
	for _, c := range cases {
		if got := c.c.ElicitationAllowed(c.cl); got != c.want {
			t.Errorf("%s: ElicitationAllowed(%q) = %v, want %v", c.name, c.cl, got, c.want)
		}
	}
	for _, cl := range []act.ConsequenceClass{act.ClassDataDisclosure, act.ClassPersistentStateChange, act.ClassFinancial, act.ClassNetworkControl, act.ClassPhysical, act.ClassCommunication, act.ClassOther} {
		if ElicitationEligible(cl) {
			t.Errorf("%s is eligible for elicitation", cl)
		}
	}
}
