package kubectlplugin

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/actgate/actgate/api/v1alpha1"
)

// ledgerRows is what `moments` computes from the ledger file: the moments pending at testNow
// (for principal, or everyone when ""), with their acts.
func ledgerRows(t *testing.T, namespace, principal string) []MomentRow {
	t.Helper()
	objs := loadObjects(t, "testdata/tables/ledger.yaml")
	acts := map[string]*v1alpha1.Act{}
	for i := range objs.acts {
		acts[objs.acts[i].Namespace+"/"+objs.acts[i].Name] = &objs.acts[i]
	}
	var rows []MomentRow
	for i := range objs.moments {
		bm := &objs.moments[i]
		if namespace != "" && bm.Namespace != namespace {
			continue
		}
		if StatusAt(bm, testNow) != StatusPending || principal != "" && bm.Spec.Principal != principal {
			continue
		}
		rows = append(rows, MomentRow{Moment: OpenMoment(bm), Act: acts[bm.Namespace+"/"+bm.Spec.ActRef.Name]})
	}
	return rows
}

func ledgerActs(t *testing.T, namespace string) []v1alpha1.Act {
	t.Helper()
	var out []v1alpha1.Act
	for _, a := range loadObjects(t, "testdata/tables/ledger.yaml").acts {
		if namespace == "" || a.Namespace == namespace {
			out = append(out, a)
		}
	}
	return out
}

func TestTablesGolden(t *testing.T) {
	g := newGoldenSet("table")
	for _, tc := range []struct {
		name   string
		output string
		allNS  bool
		print  func(output string, allNS bool) (string, error)
	}{
		{"acts", OutputTable, false, printActs(t, "payments")},
		{"acts-wide", OutputWide, false, printActs(t, "payments")},
		{"acts-all-namespaces", OutputTable, true, printActs(t, "")},
		{"acts-name", OutputName, false, printActs(t, "payments")},
		{"moments-alice", OutputTable, false, printMoments(t, "payments", "alice@example.com")},
		{"moments-alice-all-namespaces", OutputTable, true, printMoments(t, "", "alice@example.com")},
		{"moments-bob", OutputTable, false, printMoments(t, "payments", "bob@example.com")},
		{"moments-all-wide", OutputWide, true, printMoments(t, "", "")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.print(tc.output, tc.allNS)
			if err != nil {
				t.Fatal(err)
			}
			noTerminalControl(t, got)
			g.check(t, tc.name, got)
		})
	}
	g.orphans(t)
}

func printActs(t *testing.T, ns string) func(string, bool) (string, error) {
	return func(output string, allNS bool) (string, error) {
		acts := ledgerActs(t, ns)
		var b bytes.Buffer
		err := PrintList(&b, output, allNS, ActsTable(acts, output == OutputWide, testNow), &v1alpha1.ActList{Items: acts}, "act.actgate.io")
		return b.String(), err
	}
}

func printMoments(t *testing.T, ns, principal string) func(string, bool) (string, error) {
	return func(output string, allNS bool) (string, error) {
		rows := ledgerRows(t, ns, principal)
		var b bytes.Buffer
		err := PrintList(&b, output, allNS, MomentsTable(rows, principal == "", output == OutputWide, testNow), &v1alpha1.BindingMomentList{}, "bindingmoment.actgate.io")
		return b.String(), err
	}
}

// TestMomentsTableShowsWhatTheDigestNames: the synopsis column comes from the envelope, never
// from spec.synopsis, and a discarded envelope shows its code instead of any synopsis.
func TestMomentsTableShowsWhatTheDigestNames(t *testing.T) {
	in := showInput(t, "testdata/show/synopsis-mismatch.yaml")
	out := render(t, func(b *bytes.Buffer) error {
		return PrintList(b, OutputWide, false, MomentsTable([]MomentRow{{Moment: in.Moment, Act: in.Act}}, false, true, testNow), nil, "")
	})
	if strings.Contains(out, "Send EUR 25.00") {
		t.Errorf("the table shows spec.synopsis, which the envelope does not carry:\n%s", out)
	}
	mustContainInOrder(t, out, "<envelope discarded: "+string(CodeSynopsisMismatch)+">")

	rows := ledgerRows(t, "payments", "alice@example.com")
	out = render(t, func(b *bytes.Buffer) error {
		return PrintList(b, OutputTable, false, MomentsTable(rows, false, false, testNow), nil, "")
	})
	for _, gone := range []string{"old-expired-alice", "resolved-alice", "controller-expired-alice", "send-payment-inv-2291-bob"} {
		if strings.Contains(out, gone) {
			t.Errorf("alice's pending moments list %s:\n%s", gone, out)
		}
	}
	mustContainInOrder(t, out, "send-payment-inv-2291-alice", "share-dates-alice")
}

func TestPrintListJSONAndYAML(t *testing.T) {
	acts := ledgerActs(t, "payments")
	list := actList(acts)
	for _, output := range []string{OutputJSON, OutputYAML} {
		t.Run(output, func(t *testing.T) {
			out := render(t, func(b *bytes.Buffer) error {
				return PrintList(b, output, false, ActsTable(acts, false, testNow), list, "act.actgate.io")
			})
			raw := []byte(out)
			if output == OutputYAML {
				var err error
				if raw, err = yaml.YAMLToJSON(raw); err != nil {
					t.Fatal(err)
				}
			}
			var back v1alpha1.ActList
			if err := json.Unmarshal(raw, &back); err != nil {
				t.Fatal(err)
			}
			if back.Kind != "ActList" || len(back.Items) != len(acts) || back.Items[1].Kind != "Act" || back.Items[1].Spec.ActionDigest != acts[1].Spec.ActionDigest {
				t.Errorf("round trip lost the list: kind %q, %d items", back.Kind, len(back.Items))
			}
		})
	}
	if err := PrintList(&bytes.Buffer{}, "xml", false, ActsTable(acts, false, testNow), list, "act"); err == nil {
		t.Error("-o xml accepted")
	}
}

func TestShortDigest(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"sha256:8754764c935e7b8325e6eecda6f1546159eef8be6dd48f9a49e46ea8ac320708", "sha256:8754764c935e"},
		{"sha256:8754", "sha256:8754"},
		{"", ""},
		{"sha256:\x1b[2J", "sha256:\uFFFD[2J"},
	} {
		if got := shortDigest(tc.in); got != tc.want {
			t.Errorf("shortDigest(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
