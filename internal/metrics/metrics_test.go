package metrics_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/metrics"
	"github.com/actgate/actgate/internal/sink"
)

type want struct {
	name   string
	labels map[string]string
	value  float64 // counters and gauges
	count  uint64  // histograms
	sum    float64 // histograms
}

func check(t *testing.T, ss []series, ws []want) {
	t.Helper()
	for _, w := range ws {
		s, ok := find(ss, w.name, w.labels)
		if !ok {
			t.Errorf("%s%v: no such series; have:\n%s", w.name, w.labels, dump(ss, w.name))
			continue
		}
		if s.value != w.value || s.count != w.count || s.sum != w.sum {
			t.Errorf("%s%v = value %v count %d sum %v, want value %v count %d sum %v", w.name, w.labels,
				s.value, s.count, s.sum, w.value, w.count, w.sum)
		}
	}
}

func dec(decision, code string, class act.ConsequenceClass, n float64) want {
	return want{name: metrics.NameDecisions, labels: map[string]string{"decision": decision, "code": code, "class": string(class)}, value: n}
}

func mcpDuration(name, errType string, n uint64) want {
	return want{name: name, labels: map[string]string{"mcp_method_name": "tools/call", "gen_ai_operation_name": "execute_tool", "error_type": errType}, count: n}
}

func sideEffect(code ef.EFCode, class act.ConsequenceClass, n float64) want {
	return want{name: metrics.NameSideEffectDenies, labels: map[string]string{"code": string(code), "class": string(class)}, value: n}
}

func moment(name string, class act.ConsequenceClass, decisionClass string, n float64, extra ...string) want {
	l := map[string]string{"policy": policyName, "class": string(class), "decision_class": decisionClass}
	for i := 0; i+1 < len(extra); i += 2 {
		l[extra[i]] = extra[i+1]
	}
	return want{name: name, labels: l, value: n}
}

func path(p metrics.Path, n uint64) want {
	return want{name: metrics.NameEnforceDuration, labels: map[string]string{"path": string(p)}, count: n}
}

// TestGateMetricsAfterRealCalls drives a real sink.Gate through every kind of decision and
// moment and asserts every counter's exact value.
func TestGateMetricsAfterRealCalls(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := metrics.NewGate(reg)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, newPolicy(), m)
	const secret = "SECRET-ARG-7731"
	unknownClass := act.DefaultClass("rm_rf")

	// Hot path, policy denies (informational and not), an unknown tool, an unmappable call.
	f.handle(call("s1", "tools", "search", `{"q":"`+secret+`"}`))
	f.handle(call("s1", "tools", "search", `{"q":"other"}`))
	f.handle(call("s1", "tools", "lookup", `{"q":"`+secret+`"}`))
	f.handle(call("s1", "tools", "delete_all", `{"path":"`+secret+`"}`))
	f.handle(call("s1", "tools", "rm_rf", `{}`))
	bad := call("", "tools", "search", `{}`)
	if res := f.handle(bad); res.Code != ef.EFActInvalid {
		t.Fatalf("a call without a session: %+v", res)
	}

	// Permit, its replay, and a dispatch whose outcome is unknown, then a retry of it.
	permitted := f.handle(call("s1", "tools", "email_send", `{"to":"`+secret+`"}`))
	if !permitted.Allowed || !permitted.Invoked {
		t.Fatalf("permit: %+v", permitted)
	}
	if res := f.handle(call("s1", "tools", "email_send", `{"to":"`+secret+`"}`)); !res.Replayed {
		t.Fatalf("replay: %+v", res)
	}
	f.up.outcome = sink.OutcomeIndeterminate
	if res := f.handle(call("s1", "tools", "email_send", `{"to":"b@example.com"}`)); res.State != journal.StateIndeterminate || !res.Invoked {
		t.Fatalf("indeterminate: %+v", res)
	}
	f.up.outcome = sink.OutcomeExecuted
	if res := f.handle(call("s2", "tools", "email_send", `{"to":"b@example.com"}`)); res.Code != ef.EFIndeterminate || res.Invoked {
		t.Fatalf("retry of an INDETERMINATE act: %+v", res)
	}

	// A gate-authored moment resolved with the question-space hatch 90 s after emission.
	esc := f.handle(call("s1", "pay", "payout_create", `{"amount":5000,"to":"`+secret+`"}`))
	if esc.Code != ef.EFEscalationRequired || esc.Moment == nil {
		t.Fatalf("escalation: %+v", esc)
	}
	f.clock.Advance(90 * time.Second)
	f.resolve(esc.Moment, "alice", "question")

	// A second one that expires unresolved, noticed by the sweep.
	if res := f.handle(call("s2", "pay", "payout_create", `{"amount":7,"to":"acct-1"}`)); res.Moment == nil {
		t.Fatalf("escalation: %+v", res)
	}
	f.clock.Advance(sink.DefaultMomentTTL + time.Second)
	if n := f.gate.SweepMoments(); n != 1 {
		t.Fatalf("swept %d, want 1", n)
	}

	// An agent-proposed moment with the question-space hatch disabled (envelope-04 §12.3),
	// declined at once.
	p := sink.Proposal{
		Synopsis: "Refund the duplicate charge.", Findings: []string{"Two identical charges."},
		Recommendations: []string{"Refund one."}, Stem: "What should happen to the duplicate charge?",
		Options: []sink.Option{
			{Label: "Refund 1", Reasoning: "r", Tool: "payout_create", Server: "pay", Args: json.RawMessage(`{"amount":1,"to":"` + secret + `"}`)},
			{Label: "Refund 2", Reasoning: "r", Tool: "payout_create", Server: "pay", Args: json.RawMessage(`{"amount":2,"to":"` + secret + `"}`)},
		},
		Hatches: []string{sink.HatchFreeText},
	}
	prop, err := f.gate.RequestMoment(context.Background(), "s3", agentID, p)
	if err != nil || prop.Moment == nil {
		t.Fatalf("proposal: %+v %v", prop, err)
	}
	if h := prop.Moment.Envelope.Hatches(); !h.FreeText || h.Dialogue {
		t.Fatalf("hatches %+v", h)
	}
	f.resolve(prop.Moment, "alice", "declined")

	// Neither gate-authored envelopes nor proposals carry meta today, so the gate never emits
	// a calibration_note: tell the observer about such a moment directly (§5.9).
	m.MomentEmitted(sink.MomentEvent{Policy: policyName, Class: act.ClassFinancial, DecisionClass: "Consent",
		FreeTextHatch: true, DialogueHatch: true, CalibrationNote: true, Created: f.clock.Now()})

	if n := f.up.count(); n != 4 {
		t.Fatalf("upstream called %d times, want 4 (2 search, 1 email, 1 indeterminate email)", n)
	}
	ss := gather(t, reg)
	check(t, ss, []want{
		dec("Allowed", "", act.ClassInformational, 2),
		dec("Denied", string(ef.EFPolicyDenied), act.ClassInformational, 1),
		dec("Denied", string(ef.EFPolicyDenied), act.ClassPersistentStateChange, 1),
		dec("Denied", string(ef.EFUnknownTool), unknownClass, 1),
		dec("Denied", string(ef.EFActInvalid), metrics.ClassUnclassified, 1),
		dec("Allowed", "", act.ClassCommunication, 1),
		// The dispatch whose outcome is unknown was allowed and invoked; its code says so.
		dec("Allowed", string(ef.EFIndeterminate), act.ClassCommunication, 1),
		dec("Replayed", "", act.ClassCommunication, 1),
		dec("Denied", string(ef.EFIndeterminate), act.ClassCommunication, 1),
		dec("Escalated", string(ef.EFEscalationRequired), act.ClassFinancial, 2),

		sideEffect(ef.EFPolicyDenied, act.ClassPersistentStateChange, 1),
		sideEffect(ef.EFIndeterminate, act.ClassCommunication, 1),
		sideEffect(ef.EFEscalationRequired, act.ClassFinancial, 2),

		path(metrics.PathHot, 2),
		path(metrics.PathDeny, 5), // lookup, delete_all, rm_rf, no session, the refused retry
		path(metrics.PathPermit, 3),
		path(metrics.PathEscalate, 2),

		{name: metrics.NameIndeterminate, labels: map[string]string{"source": metrics.SourceJournal}, value: 1},

		// The MCP semantic conventions' durations: every tools/call from the agent's side (a
		// refusal's error_type its EF code), and the upstream calls actually made (error_type
		// the outcome when not EXECUTED).
		mcpDuration(metrics.NameMCPServerOperationDuration, "", 4), // 2 searches, the email, its replay
		mcpDuration(metrics.NameMCPServerOperationDuration, string(ef.EFUnknownTool), 1),
		mcpDuration(metrics.NameMCPServerOperationDuration, string(ef.EFIndeterminate), 2),
		mcpDuration(metrics.NameMCPClientOperationDuration, "", 3),
		mcpDuration(metrics.NameMCPClientOperationDuration, string(journal.StateIndeterminate), 1),

		moment(metrics.NameMomentsEmitted, act.ClassFinancial, "none", 3),
		moment(metrics.NameMomentsEmitted, act.ClassFinancial, "consent", 1),
		moment(metrics.NameMomentsResolved, act.ClassFinancial, "none", 1, "kind", "question"),
		moment(metrics.NameMomentsResolved, act.ClassFinancial, "none", 1, "kind", "declined"),
		moment(metrics.NameMomentsExpired, act.ClassFinancial, "none", 1),
		moment(metrics.NameMomentsHatchDisabled, act.ClassFinancial, "none", 1, "hatch", "dialogue"),
		moment(metrics.NameMomentsCalibrationNote, act.ClassFinancial, "consent", 1),
		{name: metrics.NameMomentResolution, labels: map[string]string{"kind": "question"}, count: 1, sum: 90},
		{name: metrics.NameMomentResolution, labels: map[string]string{"kind": "declined"}, count: 1, sum: 0},
	})
	// Nothing else: every series is one of the above.
	sideEffects := 4.0
	if unknownClass != act.ClassInformational {
		sideEffects++
		check(t, ss, []want{sideEffect(ef.EFUnknownTool, unknownClass, 1)})
	}
	totals := map[string]float64{
		metrics.NameDecisions: 12, metrics.NameSideEffectDenies: sideEffects,
		metrics.NameEnforceDuration: 12, metrics.NameMomentsHatchDisabled: 1, metrics.NameMomentsCalibrationNote: 1,
		metrics.NameMomentsResolved: 2, metrics.NameMomentsExpired: 1, metrics.NameMomentsEmitted: 4,
		metrics.NameMCPServerOperationDuration: 12, metrics.NameMCPClientOperationDuration: 4,
	}
	for name, n := range totals {
		if got := countOf(ss, name); got != n {
			t.Errorf("%s totals %v, want %v:\n%s", name, got, n, dump(ss, name))
		}
	}

	// No act id, digest, principal, agent or argument value is ever a label value.
	for _, s := range ss {
		for k, v := range s.labels {
			for _, bad := range []string{secret, permitted.ActID, "sha256:", "alice", agentID, "s1", esc.Moment.ID} {
				if bad != "" && strings.Contains(v, bad) {
					t.Errorf("%s label %s=%q carries %q", s.name, k, v, bad)
				}
			}
		}
	}

	// A restarted process counts the journal's INDETERMINATE records again.
	reg2 := prometheus.NewPedanticRegistry()
	m2, err := metrics.NewGate(reg2)
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.SeedIndeterminate(context.Background(), f.store); err != nil {
		t.Fatal(err)
	}
	check(t, gather(t, reg2), []want{{name: metrics.NameIndeterminate, labels: map[string]string{"source": metrics.SourceJournal}, value: 1}})
}

// TestAuditModeIsNotCountedAsDenies: audit mode lets calls through; what enforcement would
// have refused is AuditDenied on the audit path, never a side-effect deny.
func TestAuditModeIsNotCountedAsDenies(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := metrics.NewGate(reg)
	if err != nil {
		t.Fatal(err)
	}
	p := newPolicy()
	p.audit = true
	f := newFixture(t, p, m)
	f.handle(call("s1", "tools", "delete_all", `{}`))
	f.handle(call("s1", "tools", "search", `{}`))
	if n := f.up.count(); n != 2 {
		t.Fatalf("upstream called %d times, want 2 (audit mode lets calls through)", n)
	}
	ss := gather(t, reg)
	check(t, ss, []want{
		dec("AuditDenied", string(ef.EFPolicyDenied), act.ClassPersistentStateChange, 1),
		dec("Allowed", "", act.ClassInformational, 1),
		path(metrics.PathAudit, 2),
	})
	if n := countOf(ss, metrics.NameSideEffectDenies); n != 0 {
		t.Fatalf("side-effect denies in audit mode: %v", n)
	}
}

func TestDecisionClassLabelsAreBounded(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := metrics.NewMoments(reg)
	if err != nil {
		t.Fatal(err)
	}
	emit := func(dc string) {
		m.Emitted(metrics.Moment{Policy: policyName, Class: act.ClassFinancial, DecisionClass: dc, FreeTextHatch: true, DialogueHatch: true})
	}
	for _, tc := range []struct{ in, label string }{
		{"", "none"},
		{"Consent", "consent"},
		{"permission-delta", "permission-delta"},
		{"has space", "other"},
		{"naïve", "other"},
		{strings.Repeat("a", metrics.MaxDecisionClassLen+1), "other"},
		{"recompute.v2", "recompute.v2"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			emit(tc.in)
			if _, ok := find(gather(t, reg), metrics.NameMomentsEmitted, map[string]string{"policy": policyName, "class": "FINANCIAL", "decision_class": tc.label}); !ok {
				t.Fatalf("no series with decision_class %q", tc.label)
			}
		})
	}
	// An agent inventing classes gets at most MaxDecisionClasses of them; the rest are "other".
	for i := range 2 * metrics.MaxDecisionClasses {
		emit(fmt.Sprintf("class-%d", i))
	}
	distinct := map[string]bool{}
	for _, s := range gather(t, reg) {
		if s.name == metrics.NameMomentsEmitted {
			distinct[s.labels["decision_class"]] = true
		}
	}
	// none and other are always allowed; consent, permission-delta and recompute.v2 took three.
	if len(distinct) != metrics.MaxDecisionClasses+2 || !distinct["other"] {
		t.Fatalf("%d decision classes: %v", len(distinct), distinct)
	}
}

func TestClassAndKindLabelsAreBounded(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := metrics.NewMoments(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.Resolved(metrics.Moment{Policy: policyName, Class: "NOT_A_CLASS"}, "bogus", -time.Second)
	check(t, gather(t, reg), []want{
		moment(metrics.NameMomentsResolved, act.ClassOther, "none", 1, "kind", "other"),
		{name: metrics.NameMomentResolution, labels: map[string]string{"kind": "other"}, count: 1, sum: 0},
	})
}

// TestResolutionSurfaceLabelsAreBounded: resolution.via.surface is the writing client's word,
// so the surface label keeps actgate's own surfaces, "unknown" for none and "other" for any
// other; kinds outside envelope-04 §7.3 are "other"; a negative time is observed as 0.
func TestResolutionSurfaceLabelsAreBounded(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	r, err := metrics.NewResolutions(reg)
	if err != nil {
		t.Fatal(err)
	}
	r.Resolved("approval-service", "option", 90*time.Second)
	r.Resolved("console", "declined", time.Second)
	r.Resolved("kubectl", "question", time.Minute)
	r.Resolved("", "answer", 2*time.Second)
	for i := range 100 {
		r.Resolved(fmt.Sprintf("bot-%d", i), "answer", 0)
	}
	r.Resolved("Console", "approve", -time.Hour)
	total := func(surface, kind string, n float64) want {
		return want{name: metrics.NameBindingMomentResolutions, labels: map[string]string{"surface": surface, "kind": kind}, value: n}
	}
	since := func(surface string, n uint64, sum float64) want {
		return want{name: metrics.NameBindingMomentTimeToResolution, labels: map[string]string{"surface": surface}, count: n, sum: sum}
	}
	ss := gather(t, reg)
	check(t, ss, []want{
		total("approval-service", "option", 1), total("console", "declined", 1), total("kubectl", "question", 1),
		total("unknown", "answer", 1), total("other", "answer", 100), total("other", "other", 1),
		since("approval-service", 1, 90), since("console", 1, 1), since("kubectl", 1, 60), since("unknown", 1, 2), since("other", 101, 0),
	})
	n := 0
	for _, s := range ss {
		if s.name == metrics.NameBindingMomentResolutions {
			n++
		}
	}
	if n != 6 {
		t.Fatalf("%d resolution series, want 6:\n%s", n, dump(ss, metrics.NameBindingMomentResolutions))
	}
	var nilR *metrics.Resolutions
	nilR.Resolved("kubectl", "option", time.Second) // records nothing, does not panic
}

func TestReconciliationResults(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	r, err := metrics.NewReconciliation(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range []string{"Executed", "Executed", "Unauthenticated", metrics.ResultNotConfigured, "made-up"} {
		r.Observe(res)
	}
	res := func(v string, n float64) want {
		return want{name: metrics.NameReconciliationResults, labels: map[string]string{"result": v}, value: n}
	}
	check(t, gather(t, reg), []want{res("Executed", 2), res("Unauthenticated", 1), res("NotConfigured", 1), res("Other", 1)})
}

func TestRegisterIndeterminateAsksAtScrapeTime(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	n, fail := 0, false
	err := metrics.RegisterIndeterminate(reg, metrics.SourceActs, time.Second, func(ctx context.Context) (int, error) {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("count called without a deadline")
		}
		if fail {
			return 0, errors.New("cache not synced")
		}
		return n, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []int{0, 3, 1} {
		n = v
		check(t, gather(t, reg), []want{{name: metrics.NameIndeterminate, labels: map[string]string{"source": "acts"}, value: float64(v)}})
	}
	fail = true
	if _, ok := find(gather(t, reg), metrics.NameIndeterminate, map[string]string{"source": "acts"}); ok {
		t.Fatal("a failed count was reported as a number")
	}
}

func TestNilRegistererIsAnError(t *testing.T) {
	if _, err := metrics.NewGate(nil); err == nil {
		t.Fatal("NewGate(nil) succeeded")
	}
	if _, err := metrics.NewMoments(nil); err == nil {
		t.Fatal("NewMoments(nil) succeeded")
	}
	if _, err := metrics.NewReconciliation(nil); err == nil {
		t.Fatal("NewReconciliation(nil) succeeded")
	}
	if _, err := metrics.NewResolutions(nil); err == nil {
		t.Fatal("NewResolutions(nil) succeeded")
	}
	// Registering twice on one registry is refused, not silently merged.
	reg := prometheus.NewPedanticRegistry()
	if _, err := metrics.NewGate(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := metrics.NewGate(reg); err == nil {
		t.Fatal("a second NewGate on the same registry succeeded")
	}
}

func TestReplacingRegistersTwice(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	first, err := metrics.NewReconciliation(metrics.Replacing(reg))
	if err != nil {
		t.Fatal(err)
	}
	first.Observe("Executed")
	second, err := metrics.NewReconciliation(metrics.Replacing(reg))
	if err != nil {
		t.Fatalf("second registration: %v", err)
	}
	second.Observe("Failed")
	ss := gather(t, reg)
	// The registry now reports the second set only.
	if _, ok := find(ss, metrics.NameReconciliationResults, map[string]string{"result": "Executed"}); ok {
		t.Fatal("the replaced collector is still gathered")
	}
	check(t, ss, []want{{name: metrics.NameReconciliationResults, labels: map[string]string{"result": "Failed"}, value: 1}})
}
