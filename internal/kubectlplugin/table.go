package kubectlplugin

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"

	v1alpha1 "github.com/actgate/actgate/api/v1alpha1"
)

// Output formats of -o, as kubectl spells them.
const (
	OutputTable = ""
	OutputWide  = "wide"
	OutputJSON  = "json"
	OutputYAML  = "yaml"
	OutputName  = "name"
)

// Outputs lists the -o values the list commands accept.
func Outputs() []string {
	return []string{OutputWide, OutputJSON, OutputYAML, OutputName}
}

// synopsisWidth is how much of a synopsis the narrow moments table shows; -o wide shows all.
const synopsisWidth = 60

// ActsTable is the ledger: one row per act, oldest first (the order the ledger was written).
// wide (-o wide) shows the whole action digest and adds agent, destination, policy, rule and
// the binding moments the act was escalated to.
func ActsTable(acts []v1alpha1.Act, wide bool, now time.Time) *metav1.Table {
	items := append([]v1alpha1.Act(nil), acts...)
	sort.SliceStable(items, func(i, j int) bool {
		a, b := items[i], items[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name"},
		{Name: "Tool", Type: "string"},
		{Name: "Server", Type: "string"},
		{Name: "Class", Type: "string"},
		{Name: "Decision", Type: "string"},
		{Name: "State", Type: "string"},
		{Name: "Code", Type: "string"},
		{Name: "Action", Type: "string", Description: "spec.actionDigest, abbreviated unless -o wide"},
		{Name: "Age", Type: "string"},
	}}
	if wide {
		t.ColumnDefinitions = append(t.ColumnDefinitions,
			metav1.TableColumnDefinition{Name: "Agent", Type: "string"},
			metav1.TableColumnDefinition{Name: "Destination", Type: "string"},
			metav1.TableColumnDefinition{Name: "Policy", Type: "string"},
			metav1.TableColumnDefinition{Name: "Rule", Type: "string"},
			metav1.TableColumnDefinition{Name: "Moments", Type: "string"},
		)
	}
	for i := range items {
		a := &items[i]
		action := shortDigest(string(a.Spec.ActionDigest))
		if wide {
			action = string(a.Spec.ActionDigest)
		}
		vals := []string{
			a.Name, a.Spec.Tool, a.Spec.Server, string(a.Spec.ConsequenceClass),
			string(a.Status.Decision), string(a.Status.State), a.Status.Code,
			action, age(a.CreationTimestamp, now),
		}
		if wide {
			moments := make([]string, 0, len(a.Status.BindingMomentRefs))
			for _, r := range a.Status.BindingMomentRefs {
				moments = append(moments, r.Name)
			}
			vals = append(vals, a.Spec.Agent, a.Spec.Destination, a.Spec.PolicyRef.Name, a.Spec.Rule, strings.Join(moments, ","))
		}
		t.Rows = append(t.Rows, metav1.TableRow{Cells: cells(vals...), Object: runtime.RawExtension{Object: a}})
	}
	return t
}

// MomentRow is one binding moment with what the table shows of its act; Act is nil when the
// act could not be read.
type MomentRow struct {
	Moment *Moment
	Act    *v1alpha1.Act
}

// MomentsTable lists binding moments soonest-expiring first. The synopsis is the envelope's own
// (what the digest names), never the spec copy, cut to synopsisWidth unless wide; a discarded
// envelope shows its first problem code instead. withPrincipal adds the principal column
// (moments --all); wide adds the act's server and the envelope digest.
func MomentsTable(rows []MomentRow, withPrincipal, wide bool, now time.Time) *metav1.Table {
	items := append([]MomentRow(nil), rows...)
	sort.SliceStable(items, func(i, j int) bool {
		a, b := items[i].Moment.Object, items[j].Moment.Object
		if !a.Spec.ExpiresAt.Equal(&b.Spec.ExpiresAt) {
			return a.Spec.ExpiresAt.Before(&b.Spec.ExpiresAt)
		}
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	cols := []metav1.TableColumnDefinition{{Name: "Name", Type: "string", Format: "name"}}
	if withPrincipal {
		cols = append(cols, metav1.TableColumnDefinition{Name: "Principal", Type: "string"})
	}
	cols = append(cols,
		metav1.TableColumnDefinition{Name: "Act", Type: "string"},
		metav1.TableColumnDefinition{Name: "Tool", Type: "string"},
		metav1.TableColumnDefinition{Name: "Class", Type: "string"},
		metav1.TableColumnDefinition{Name: "Expires", Type: "string"},
		metav1.TableColumnDefinition{Name: "Age", Type: "string"},
	)
	if wide {
		cols = append(cols,
			metav1.TableColumnDefinition{Name: "Server", Type: "string"},
			metav1.TableColumnDefinition{Name: "Envelope", Type: "string"},
		)
	}
	cols = append(cols, metav1.TableColumnDefinition{Name: "Synopsis", Type: "string", Description: "the envelope's synopsis slot"})
	t := &metav1.Table{ColumnDefinitions: cols}
	for _, r := range items {
		bm := r.Moment.Object
		synopsis := ""
		if r.Moment.Well() {
			synopsis = r.Moment.Envelope.Content().Synopsis
		} else {
			synopsis = fmt.Sprintf("<envelope discarded: %s>", r.Moment.Problems[0].Code)
		}
		tool, class, server := unknown, unknown, unknown
		if r.Act != nil {
			tool, class, server = r.Act.Spec.Tool, string(r.Act.Spec.ConsequenceClass), r.Act.Spec.Server
		}
		vals := []string{bm.Name}
		if withPrincipal {
			vals = append(vals, bm.Spec.Principal)
		}
		vals = append(vals, bm.Spec.ActRef.Name, tool, class, expiresIn(bm.Spec.ExpiresAt, now), age(bm.CreationTimestamp, now))
		if wide {
			vals = append(vals, server, string(bm.Spec.EnvelopeDigest), synopsis)
		} else {
			vals = append(vals, truncate(synopsis, synopsisWidth))
		}
		t.Rows = append(t.Rows, metav1.TableRow{Cells: cells(vals...), Object: runtime.RawExtension{Object: bm}})
	}
	return t
}

// unknown fills a column whose source (the act) could not be read.
const unknown = "<unknown>"

// cells makes every value terminal-safe; an empty value prints as "<none>" like kubectl's.
func cells(vals ...string) []any {
	out := make([]any, len(vals))
	for i, v := range vals {
		if v == "" {
			v = "<none>"
		}
		out[i] = safe(v)
	}
	return out
}

// age is kubectl's AGE: the short human duration since t.
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// expiresIn says how long a moment stays open: "in 14m", or "expired 3m ago".
func expiresIn(t metav1.Time, now time.Time) string {
	if d := t.Sub(now); d > 0 {
		return "in " + duration.HumanDuration(d)
	}
	return "expired " + duration.HumanDuration(now.Sub(t.Time)) + " ago"
}

// PrintList writes a list in the -o format: the table (built narrow or wide by the caller; a
// namespace column is added for -A), JSON or YAML of list (a typed list whose items are printed as read), or kind/name
// lines. kind is the lower-case resource name kubectl uses for -o name.
func PrintList(w io.Writer, output string, allNamespaces bool, table *metav1.Table, list runtime.Object, kind string) error {
	switch output {
	case OutputTable, OutputWide:
		p := printers.NewTablePrinter(printers.PrintOptions{WithNamespace: allNamespaces})
		return p.PrintObj(table, w)
	case OutputJSON:
		return (&printers.JSONPrinter{}).PrintObj(list, w)
	case OutputYAML:
		return (&printers.YAMLPrinter{}).PrintObj(list, w)
	case OutputName:
		for _, r := range table.Rows {
			if _, err := fmt.Fprintf(w, "%s/%s\n", kind, r.Cells[0]); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("unknown output format %q (allowed: %s)", safe(output), strings.Join(Outputs(), ", "))
}

// actList wraps acts in a typed list with apiVersion and kind set on it and on every item, as
// -o json|yaml prints them (a list decoded by a client carries no kinds).
func actList(items []v1alpha1.Act) *v1alpha1.ActList {
	l := &v1alpha1.ActList{Items: items}
	l.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("ActList"))
	for i := range l.Items {
		l.Items[i].SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("Act"))
	}
	return l
}

// momentList is actList for binding moments.
func momentList(items []v1alpha1.BindingMoment) *v1alpha1.BindingMomentList {
	l := &v1alpha1.BindingMomentList{Items: items}
	l.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("BindingMomentList"))
	for i := range l.Items {
		l.Items[i].SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("BindingMoment"))
	}
	return l
}
