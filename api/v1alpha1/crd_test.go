package v1alpha1_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/actgate/actgate/api/v1alpha1"
)

const crdDir = "../../config/crd/bases"

func loadCRD(t testing.TB, plural string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(crdDir, "actgate.io_"+plural+".yaml"))
	if err != nil {
		t.Fatalf("%v (run `make manifests`)", err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(b, crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

// schemaAt walks a CRD's v1alpha1 schema: a name steps into properties, "[]" into items.
func schemaAt(t testing.TB, crd *apiextensionsv1.CustomResourceDefinition, path ...string) apiextensionsv1.JSONSchemaProps {
	t.Helper()
	s := *crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	for _, p := range path {
		if p == "[]" {
			if s.Items == nil || s.Items.Schema == nil {
				t.Fatalf("%s: no items at %v", crd.Name, path)
			}
			s = *s.Items.Schema
			continue
		}
		next, ok := s.Properties[p]
		if !ok {
			t.Fatalf("%s: no property %q on the way to %v", crd.Name, p, path)
		}
		s = next
	}
	return s
}

func enumOf(t testing.TB, s apiextensionsv1.JSONSchemaProps) []string {
	t.Helper()
	var out []string
	for _, e := range s.Enum {
		var v string
		if err := json.Unmarshal(e.Raw, &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

func sorted[S ~string](vs ...S) []string {
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		out = append(out, string(v))
	}
	slices.Sort(out)
	return out
}

// The generated enums and the Go constants must list the same values: a constant the API
// server rejects, or a stored value no constant names, is a bug either way.
func TestCRDEnumsMatchGoConstants(t *testing.T) {
	tp, act, bm := loadCRD(t, "toolpolicies"), loadCRD(t, "acts"), loadCRD(t, "bindingmoments")
	classes := sorted(v1alpha1.ConsequenceClasses()...)
	if len(classes) != 8 {
		t.Fatalf("tool-use-binding §10 names 8 consequence classes, ConsequenceClasses() has %d", len(classes))
	}
	for _, tc := range []struct {
		name string
		crd  *apiextensionsv1.CustomResourceDefinition
		path []string
		want []string
	}{
		{"policy mode", tp, []string{"spec", "mode"}, sorted(v1alpha1.PolicyModeEnforce, v1alpha1.PolicyModeAudit)},
		{"server protocol", tp, []string{"spec", "servers", "[]", "protocol"}, sorted(v1alpha1.ServerProtocolMCP)},
		{"rule class", tp, []string{"spec", "rules", "[]", "consequenceClass"}, classes},
		{"evidence role", tp, []string{"spec", "rules", "[]", "evidence", "role"},
			sorted(v1alpha1.EvidenceRoleNone, v1alpha1.EvidenceRolePolicyPermit, v1alpha1.EvidenceRoleHumanAuthorization)},
		{"provenance sources", tp, []string{"spec", "rules", "[]", "provenance", "[]", "sources", "[]"},
			sorted(v1alpha1.ProvenanceUser, v1alpha1.ProvenanceSystem, v1alpha1.ProvenanceRetrieval, v1alpha1.ProvenanceToolOutput)},
		{"provenance classes", tp, []string{"spec", "rules", "[]", "provenance", "[]", "classes", "[]"}, classes},
		{"provenance action", tp, []string{"spec", "rules", "[]", "provenance", "[]", "action"},
			sorted(v1alpha1.ProvenanceActionDeny, v1alpha1.ProvenanceActionEscalate)},
		{"budget calendar", tp, []string{"spec", "rules", "[]", "budgets", "[]", "window", "calendar"},
			sorted(v1alpha1.BudgetCalendarDay, v1alpha1.BudgetCalendarWeek, v1alpha1.BudgetCalendarMonth)},
		{"budget key", tp, []string{"spec", "rules", "[]", "budgets", "[]", "key", "by"}, sorted(v1alpha1.BudgetKeyAgent,
			v1alpha1.BudgetKeyServiceAccount, v1alpha1.BudgetKeyNamespace, v1alpha1.BudgetKeyPolicy, v1alpha1.BudgetKeyExpression)},
		{"budget onExceed", tp, []string{"spec", "rules", "[]", "budgets", "[]", "onExceed"},
			sorted(v1alpha1.BudgetOnExceedDeny, v1alpha1.BudgetOnExceedEscalate)},
		{"act class", act, []string{"spec", "consequenceClass"}, classes},
		{"act decision", act, []string{"status", "decision"},
			sorted(v1alpha1.ActDecisionAllowed, v1alpha1.ActDecisionDenied, v1alpha1.ActDecisionEscalated, v1alpha1.ActDecisionAuditDenied)},
		{"act state", act, []string{"status", "state"}, sorted(
			v1alpha1.ActStateVerified, v1alpha1.ActStateMatch, v1alpha1.ActStateSatisfied, v1alpha1.ActStateAuthorized,
			v1alpha1.ActStateConsumed, v1alpha1.ActStateReserved, v1alpha1.ActStateDispatchPending, v1alpha1.ActStateInvoked,
			v1alpha1.ActStateExecuted, v1alpha1.ActStateFailed, v1alpha1.ActStateIndeterminate, v1alpha1.ActStateExpired)},
		{"reconciliation result", act, []string{"status", "reconciliation", "lastResult"}, sorted(
			v1alpha1.ReconciliationExecuted, v1alpha1.ReconciliationFailed, v1alpha1.ReconciliationNoEvidence,
			v1alpha1.ReconciliationUnauthenticated, v1alpha1.ReconciliationMismatch, v1alpha1.ReconciliationConflicting,
			v1alpha1.ReconciliationUnreachable)},
		{"resolution kind", bm, []string{"spec", "resolution", "kind"},
			sorted(v1alpha1.ResolutionOption, v1alpha1.ResolutionAnswer, v1alpha1.ResolutionQuestion, v1alpha1.ResolutionDeclined)},
		{"binding moment state", bm, []string{"status", "state"},
			sorted(v1alpha1.BindingMomentPending, v1alpha1.BindingMomentResolved, v1alpha1.BindingMomentExpired)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := enumOf(t, schemaAt(t, tc.crd, tc.path...)); !slices.Equal(got, tc.want) {
				t.Errorf("CRD enum %v, Go constants %v", got, tc.want)
			}
		})
	}
}

// Digests are "sha256:" + 64 lowercase hex wherever they appear (docs/architecture.md "Digests");
// arguments never appear raw.
func TestCRDDigestFieldsArePatterned(t *testing.T) {
	const pattern = `^sha256:[0-9a-f]{64}$`
	act, bm, ra := loadCRD(t, "acts"), loadCRD(t, "bindingmoments"), loadCRD(t, "receiptanchors")
	for _, tc := range []struct {
		crd  *apiextensionsv1.CustomResourceDefinition
		path []string
	}{
		{act, []string{"spec", "argumentsDigest"}},
		{act, []string{"spec", "actionDigest"}},
		{act, []string{"status", "receiptDigest"}},
		{act, []string{"status", "reconciliation", "evidenceDigest"}},
		{bm, []string{"spec", "envelopeDigest"}},
		{bm, []string{"spec", "resolution", "envelopeDigest"}},
		{ra, []string{"status", "checkpoint", "head"}},
	} {
		if got := schemaAt(t, tc.crd, tc.path...).Pattern; got != pattern {
			t.Errorf("%s %v pattern = %q, want %q", tc.crd.Name, tc.path, got, pattern)
		}
	}
	for name := range schemaAt(t, act, "spec").Properties {
		if name == "arguments" || name == "args" {
			t.Errorf("Act spec has a raw %q field", name)
		}
	}
}

func TestCRDNamesAndColumns(t *testing.T) {
	for _, tc := range []struct {
		plural, shortName string
		columns           []string
	}{
		{"toolpolicies", "tp", []string{"Mode", "Accepted", "Ready", "Reason", "Epoch", "Age"}},
		{"acts", "act", []string{"Tool", "Class", "Decision", "Outcome", "Code", "Age", "Reached", "Server", "Agent", "Action"}},
		{"bindingmoments", "bm", []string{"Principal", "Synopsis", "State", "Age", "Resolution", "Act", "Expires"}},
		{"receiptanchors", "ranchor", []string{"Pod", "Size", "Age", "Head", "Anchored"}},
		{"budgetledgers", "bl", []string{"Policy", "Budget", "Key", "Spent", "Remaining", "Window-End", "Rule"}},
	} {
		t.Run(tc.plural, func(t *testing.T) {
			crd := loadCRD(t, tc.plural)
			if crd.Spec.Group != "actgate.io" || crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
				t.Errorf("group %q scope %q", crd.Spec.Group, crd.Spec.Scope)
			}
			if !slices.Contains(crd.Spec.Names.ShortNames, tc.shortName) {
				t.Errorf("short names %v lack %q", crd.Spec.Names.ShortNames, tc.shortName)
			}
			v := crd.Spec.Versions[0]
			if v.Name != "v1alpha1" || !v.Served || !v.Storage || v.Subresources == nil || v.Subresources.Status == nil {
				t.Errorf("version %q served=%v storage=%v, want v1alpha1 with a status subresource", v.Name, v.Served, v.Storage)
			}
			var cols []string
			for _, c := range v.AdditionalPrinterColumns {
				cols = append(cols, c.Name)
			}
			if !slices.Equal(cols, tc.columns) {
				t.Errorf("printer columns %v, want %v", cols, tc.columns)
			}
		})
	}
}
