package webhook

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actgate/actgate/api/v1alpha1"
)

// TestToolPolicyElicitationClasses: the validating webhook refuses spec.elicitation classes for
// which envelope-04 §12.4 requires the principal's own surface, naming the field, as the CRD's
// CEL rule does (policy.Compile is the one place the set is decided).
func TestToolPolicyElicitationClasses(t *testing.T) {
	v := &ToolPolicyValidator{}
	for _, class := range []v1alpha1.ConsequenceClass{
		v1alpha1.ConsequenceFinancial, v1alpha1.ConsequenceNetworkControl, v1alpha1.ConsequenceCommunication,
		v1alpha1.ConsequenceDataDisclosure, v1alpha1.ConsequencePersistentStateChange,
		v1alpha1.ConsequencePhysical, v1alpha1.ConsequenceOther,
	} {
		t.Run(string(class), func(t *testing.T) {
			p := &v1alpha1.ToolPolicy{
				ObjectMeta: metav1.ObjectMeta{Namespace: "billing", Name: "p"},
				Spec: v1alpha1.ToolPolicySpec{
					Servers:     []v1alpha1.ToolServer{{Name: "pay", URL: "https://pay.example/mcp"}},
					Elicitation: &v1alpha1.ElicitationPolicy{Classes: []v1alpha1.ConsequenceClass{class}},
				},
			}
			_, err := v.ValidateCreate(context.Background(), p)
			if err == nil {
				t.Fatal("admitted")
			}
			if !strings.Contains(err.Error(), "spec.elicitation.classes[0]") || !strings.Contains(err.Error(), "§12.4") {
				t.Errorf("the refusal does not name the field and the reason: %v", err)
			}
		})
	}
}
