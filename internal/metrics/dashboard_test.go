package metrics_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/yaml"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/metrics"
	"github.com/actgate/actgate/internal/sink"
)

var (
	dashboardFile = filepath.Join("..", "..", "config", "grafana", "actgate-dashboard.json")
	rulesFile     = filepath.Join("..", "..", "config", "prometheus", "rules.yaml")
)

// exposed returns every metric name a process registering all of this package's metrics
// exposes, histograms with their _bucket, _sum and _count series.
func exposed(t *testing.T) map[string]bool {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	g, err := metrics.NewGate(reg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := metrics.NewReconciliation(reg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := metrics.NewResolutions(reg)
	if err != nil {
		t.Fatal(err)
	}
	res.Resolved("approval-service", "option", time.Minute)
	// One event of each kind, so every vector has a child to gather.
	g.CallDecided(sink.CallEvent{Class: act.ClassFinancial, Code: ef.EFPolicyDenied, Outcome: sink.PolicyDeny, Duration: time.Millisecond})
	g.CallDecided(sink.CallEvent{Class: act.ClassFinancial, Allowed: true, Invoked: true, State: journal.StateIndeterminate, Outcome: sink.PolicyPermit})
	e := sink.MomentEvent{Policy: "p", Class: act.ClassFinancial, CalibrationNote: true, Created: t0}
	g.MomentEmitted(e)
	g.MomentResolved(e, sink.ResolutionEvent{Kind: "question", At: t0.Add(time.Minute)})
	g.MomentExpired(e)
	r.Observe("Executed")

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
		if mf.GetType() == dto.MetricType_HISTOGRAM {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[mf.GetName()+s] = true
			}
		}
	}
	for _, n := range allNames {
		if !names[n] {
			t.Fatalf("%s is not exposed after driving every event: the fixture above is incomplete", n)
		}
	}
	return names
}

// allNames is every metric this package defines.
var allNames = []string{
	metrics.NameEnforceDuration, metrics.NameDecisions, metrics.NameSideEffectDenies, metrics.NameIndeterminate,
	metrics.NameReconciliationResults, metrics.NameMomentsEmitted, metrics.NameMomentsResolved,
	metrics.NameMomentsExpired, metrics.NameMomentsHatchDisabled, metrics.NameMomentsCalibrationNote,
	metrics.NameMomentResolution, metrics.NameBindingMomentResolutions, metrics.NameBindingMomentTimeToResolution,
}

var (
	promString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	promMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promRange    = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	labelValues  = regexp.MustCompile(`label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*,[^)]*\)`)
	promIdent    = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	promKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true,
		"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
		"inf": true, "nan": true, "Inf": true, "NaN": true}
)

// metricNames returns the metric names a PromQL expression (or a Grafana label_values query)
// selects: identifiers outside strings, label matchers, ranges and grouping clauses that are
// not functions, aggregations or keywords.
func metricNames(expr string) []string {
	expr = labelValues.ReplaceAllString(expr, "$1")
	expr = promString.ReplaceAllString(expr, `""`)
	expr = promMatchers.ReplaceAllString(expr, " ")
	expr = promRange.ReplaceAllString(expr, " ")
	expr = promGrouping.ReplaceAllString(expr, " ")
	var out []string
	for _, loc := range promIdent.FindAllStringIndex(expr, -1) {
		name := expr[loc[0]:loc[1]]
		if loc[0] > 0 && (expr[loc[0]-1] == '$' || expr[loc[0]-1] >= '0' && expr[loc[0]-1] <= '9' || expr[loc[0]-1] == '.') {
			continue // a Grafana variable or part of a number (1e3)
		}
		rest := strings.TrimLeft(expr[loc[1]:], " \t\n")
		if strings.HasPrefix(rest, "(") || promKeywords[name] {
			continue
		}
		out = append(out, name)
	}
	return out
}

func TestMetricNamesExtraction(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`rate(actgate_decisions_total[5m])`, []string{"actgate_decisions_total"}},
		{`histogram_quantile(0.99, sum by (le, path) (rate(actgate_enforce_duration_seconds_bucket{job=~"$job"}[$__rate_interval])))`, []string{"actgate_enforce_duration_seconds_bucket"}},
		{`sum by (policy) (rate(a_total{kind="question"}[1h])) / sum by (policy) (rate(b_total[1h]))`, []string{"a_total", "b_total"}},
		{`x > 0 and on (policy) y >= 1e3`, []string{"x", "y"}},
		{`label_values(actgate_moments_emitted_total, policy)`, []string{"actgate_moments_emitted_total"}},
		{`sum without (instance) (up{job="a,b}"})`, []string{"up"}},
		{`actgate:moments_question_hatch:ratio_rate1h > 0.5`, []string{"actgate:moments_question_hatch:ratio_rate1h"}},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			if got := metricNames(tc.expr); !slices.Equal(got, tc.want) {
				t.Fatalf("metricNames = %q, want %q", got, tc.want)
			}
		})
	}
}

type grafanaPanel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource map[string]any `json:"datasource"`
	GridPos    map[string]int `json:"gridPos"`
	Targets    []struct {
		Expr       string         `json:"expr"`
		Datasource map[string]any `json:"datasource"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"`
}

type grafanaDashboard struct {
	SchemaVersion int            `json:"schemaVersion"`
	UID           string         `json:"uid"`
	Title         string         `json:"title"`
	Panels        []grafanaPanel `json:"panels"`
	Templating    struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

// TestDashboardReferencesOnlyRealMetrics parses config/grafana/actgate-dashboard.json and
// config/prometheus/rules.yaml, extracts every metric name their expressions select and fails
// on one this package's registry does not expose; it also fails when a metric has no panel.
func TestDashboardReferencesOnlyRealMetrics(t *testing.T) {
	names := exposed(t)
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("dashboard is not JSON: %v", err)
	}
	// Importable: a schema version, a uid, a datasource variable every query uses.
	if d.SchemaVersion < 36 || d.UID == "" || d.Title == "" {
		t.Fatalf("schemaVersion %d, uid %q, title %q", d.SchemaVersion, d.UID, d.Title)
	}
	hasDS := false
	used := map[string]bool{}
	for _, v := range d.Templating.List {
		if v.Type == "datasource" && v.Name == "datasource" && strings.Contains(string(v.Query), "prometheus") {
			hasDS = true
		}
		if v.Type == "query" {
			var q struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal(v.Query, &q); err != nil {
				t.Fatalf("variable %s: %v", v.Name, err)
			}
			for _, n := range metricNames(q.Query) {
				if !names[n] {
					t.Errorf("variable %s selects %s, which actgate does not expose", v.Name, n)
				}
			}
		}
	}
	if !hasDS {
		t.Fatal("no datasource template variable of type prometheus")
	}

	ids := map[int]bool{}
	var walk func([]grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			if ids[p.ID] {
				t.Errorf("panel id %d used twice", p.ID)
			}
			ids[p.ID] = true
			if p.GridPos["w"] == 0 || p.GridPos["h"] == 0 {
				t.Errorf("panel %q has no size", p.Title)
			}
			if p.Type != "row" {
				if p.Datasource["uid"] != "${datasource}" {
					t.Errorf("panel %q does not use the datasource variable: %v", p.Title, p.Datasource)
				}
				if len(p.Targets) == 0 {
					t.Errorf("panel %q has no query", p.Title)
				}
			}
			for _, tg := range p.Targets {
				ns := metricNames(tg.Expr)
				if len(ns) == 0 {
					t.Errorf("panel %q: no metric in %q", p.Title, tg.Expr)
				}
				for _, n := range ns {
					if !names[n] {
						t.Errorf("panel %q selects %s, which actgate does not expose", p.Title, n)
					}
					used[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_count"), "_sum")] = true
				}
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	var missing []string
	for _, n := range allNames {
		if !used[n] {
			missing = append(missing, n)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("metrics without a panel: %v", missing)
	}

	// The recording and alerting rules: metric names or the rules' own recorded series.
	rb, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Name     string `json:"name"`
			Interval string `json:"interval"`
			Rules    []struct {
				Record      string            `json:"record"`
				Alert       string            `json:"alert"`
				Expr        string            `json:"expr"`
				For         string            `json:"for"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(rb, &rules); err != nil {
		t.Fatalf("rules.yaml: %v", err)
	}
	recorded := map[string]bool{}
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				recorded[r.Record] = true
			}
		}
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			if (r.Record == "") == (r.Alert == "") || r.Expr == "" {
				t.Errorf("rule %q%q: exactly one of record and alert, and an expr", r.Record, r.Alert)
			}
			for _, m := range metricNames(r.Expr) {
				if !names[m] && !recorded[m] {
					t.Errorf("rule %q%q selects %s, which actgate does not expose", r.Record, r.Alert, m)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("rules.yaml holds no rule")
	}
}
