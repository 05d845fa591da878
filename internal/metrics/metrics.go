package metrics

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/reconcile"
	"github.com/actgate/actgate/internal/sink"
	"github.com/actgate/actgate/internal/tracing"
)

// Metric names (the dashboard and the recording rules use exactly these).
const (
	NameEnforceDuration = "actgate_enforce_duration_seconds"
	// NameMCPServerOperationDuration and NameMCPClientOperationDuration are the OpenTelemetry
	// MCP semantic conventions' mcp.server.operation.duration and mcp.client.operation.duration
	// (unit s) as Prometheus names them: an agent's tools/call through the gate, and the gate's
	// call of the upstream.
	NameMCPServerOperationDuration = "mcp_server_operation_duration_seconds"
	NameMCPClientOperationDuration = "mcp_client_operation_duration_seconds"
	NameDecisions                  = "actgate_decisions_total"
	NameSideEffectDenies           = "actgate_side_effect_denies_total"
	NameIndeterminate              = "actgate_indeterminate_outstanding"
	NameReconciliationResults      = "actgate_reconciliation_results_total"
	NameMomentsEmitted             = "actgate_moments_emitted_total"
	NameMomentsResolved            = "actgate_moments_resolved_total"
	NameMomentsExpired             = "actgate_moments_expired_total"
	NameMomentsHatchDisabled       = "actgate_moments_hatch_disabled_total"
	NameMomentsCalibrationNote     = "actgate_moments_calibration_note_total"
	NameMomentResolution           = "actgate_moment_resolution_seconds"
	// The manager's BindingMoment resolutions by surface (see Resolutions).
	NameBindingMomentResolutions      = "actgate_bindingmoment_resolutions_total"
	NameBindingMomentTimeToResolution = "actgate_bindingmoment_time_to_resolution_seconds"
)

// Path is the enforcement path of one call (label "path" of actgate_enforce_duration_seconds).
type Path string

// Paths.
const (
	// PathHot: policy Allow (evidence role None): no authority, no fsync.
	PathHot Path = "hot"
	// PathPermit: policy Permit: authority issued, consumed and journaled before invoking.
	PathPermit Path = "permit"
	// PathEscalate: policy Escalate: refused with a binding moment, or run on a granted one.
	PathEscalate Path = "escalate"
	// PathDeny: refused by policy, or before or outside policy (unmappable call, refused retry,
	// store failure).
	PathDeny Path = "deny"
	// PathAudit: the policy is in Audit mode; the call went through the hot path.
	PathAudit Path = "audit"
)

// Decision is label "decision" of actgate_decisions_total; the spelling is the authority
// service's (actgate_authority_decisions_total).
type Decision string

// Decisions.
const (
	DecisionAllowed     Decision = "Allowed"
	DecisionReplayed    Decision = "Replayed"
	DecisionDenied      Decision = "Denied"
	DecisionEscalated   Decision = "Escalated"
	DecisionAuditDenied Decision = "AuditDenied"
)

// Hatch is label "hatch" of actgate_moments_hatch_disabled_total (envelope-04 §5.8).
type Hatch string

// Hatches.
const (
	// HatchFreeText is the answer-space hatch (question.hatches.free_text).
	HatchFreeText Hatch = "free_text"
	// HatchDialogue is the question-space hatch (question.hatches.dialogue); disabling it
	// turns a binding moment into a forced choice (§12.3).
	HatchDialogue Hatch = "dialogue"
)

// Label values used when the real value is missing or outside the closed set.
const (
	ClassUnclassified   = "UNCLASSIFIED"
	ClassOther          = string(act.ClassOther)
	CodeOther           = "EF_OTHER"
	DecisionClassNone   = "none"
	DecisionClassOther  = "other"
	KindOther           = "other"
	ResultOther         = "Other"
	MaxDecisionClasses  = 50
	MaxDecisionClassLen = 64
	maxPolicyLen        = 253
)

// Source is label "source" of actgate_indeterminate_outstanding.
const (
	// SourceJournal: INDETERMINATE records of this sink's dispatch journal.
	SourceJournal = "journal"
	// SourceActs: Acts in state INDETERMINATE in the cluster (the manager).
	SourceActs = "acts"
)

// EnforceBuckets are the enforce latency buckets: 22 exponential buckets from 5 µs to 10 s.
func EnforceBuckets() []float64 { return prometheus.ExponentialBucketsRange(5e-6, 10, 22) }

// ResolutionBuckets are the emission → resolution buckets, 1 s to 1 day: a principal answers in
// seconds at a console and in hours from a ticket queue.
func ResolutionBuckets() []float64 {
	return []float64{1, 5, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 43200, 86400}
}

var errNilRegisterer = errors.New("metrics: nil Registerer")

func register(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	if reg == nil {
		return errNilRegisterer
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// labels normalises label values into their bounded sets.
type labels struct {
	codes map[ef.EFCode]bool

	mu        sync.Mutex
	decisions map[string]bool // decision classes seen, at most MaxDecisionClasses
}

func newLabels() *labels {
	l := &labels{codes: map[ef.EFCode]bool{}, decisions: map[string]bool{}}
	for _, i := range ef.All() {
		l.codes[i.Code] = true
	}
	return l
}

func (l *labels) code(c ef.EFCode) string {
	switch {
	case c == "":
		return ""
	case l.codes[c]:
		return string(c)
	}
	return CodeOther
}

// class is a consequence class label (tool-use-binding §20).
func class(c act.ConsequenceClass) string {
	switch {
	case c == "":
		return ClassUnclassified
	case c.Valid():
		return string(c)
	}
	return ClassOther
}

// policy is a policy name label: operator-chosen names, clipped.
func policy(p string) string {
	if len(p) > maxPolicyLen {
		return p[:maxPolicyLen]
	}
	return p
}

// decisionClass normalises an agent-written meta.decision_class (see the package doc).
func (l *labels) decisionClass(s string) string {
	if s == "" {
		return DecisionClassNone
	}
	s = strings.ToLower(s)
	if len(s) > MaxDecisionClassLen {
		return DecisionClassOther
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return DecisionClassOther
		}
	}
	if s == DecisionClassNone || s == DecisionClassOther {
		return s
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.decisions[s] {
		return s
	}
	if len(l.decisions) >= MaxDecisionClasses {
		return DecisionClassOther
	}
	l.decisions[s] = true
	return s
}

// resolutionKind is a resolution kind label (envelope-04 §7.3).
func resolutionKind(k string) string {
	switch k {
	case "option", "answer", "question", "declined":
		return k
	}
	return KindOther
}

// Moment describes a binding moment for Moments. Policy is the ToolPolicy (or standalone
// policy) that required the human decision, Class the consequence class of the call, and the
// rest comes from the envelope (envelope-04 §5.8, §5.9).
type Moment struct {
	Policy          string
	Class           act.ConsequenceClass
	DecisionClass   string
	FreeTextHatch   bool
	DialogueHatch   bool
	CalibrationNote bool
}

// FromEvent is the Moment of a sink.MomentEvent.
func FromEvent(e sink.MomentEvent) Moment {
	return Moment{Policy: e.Policy, Class: e.Class, DecisionClass: e.DecisionClass,
		FreeTextHatch: e.FreeTextHatch, DialogueHatch: e.DialogueHatch, CalibrationNote: e.CalibrationNote}
}

// Moments are the veto-signal metrics of binding moments (envelope-04 §12.2, §12.3, §5.9;
// docs/operations.md "Metrics and Events"):
//
//   - actgate_moments_emitted_total{policy,class,decision_class}
//   - actgate_moments_resolved_total{policy,class,decision_class,kind}
//   - actgate_moments_expired_total{policy,class,decision_class}
//   - actgate_moments_hatch_disabled_total{policy,class,decision_class,hatch}: emitted envelopes
//     with question.hatches.free_text or .dialogue false (envelope-04 §12.3), one per hatch
//   - actgate_moments_calibration_note_total{policy,class,decision_class}: emitted envelopes
//     carrying meta.calibration_note (§5.9: a persistently high rate is a defect in the agent's
//     earlier framing)
//   - actgate_moment_resolution_seconds{kind}: emission to final resolution
//
// class is the consequence class, decision_class the envelope's normalised meta.decision_class.
type Moments struct {
	l             *labels
	emitted       *prometheus.CounterVec
	resolved      *prometheus.CounterVec
	expired       *prometheus.CounterVec
	hatchDisabled *prometheus.CounterVec
	calibration   *prometheus.CounterVec
	resolution    *prometheus.HistogramVec
}

// NewMoments creates the moment metrics and registers them with reg.
func NewMoments(reg prometheus.Registerer) (*Moments, error) {
	m := newMoments(newLabels())
	if err := register(reg, m.emitted, m.resolved, m.expired, m.hatchDisabled, m.calibration, m.resolution); err != nil {
		return nil, err
	}
	return m, nil
}

func newMoments(l *labels) *Moments {
	base := []string{"policy", "class", "decision_class"}
	counter := func(name, help string, extra ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, append(append([]string{}, base...), extra...))
	}
	return &Moments{
		l:       l,
		emitted: counter(NameMomentsEmitted, "Binding moments emitted, by policy, consequence class and decision class."),
		resolved: counter(NameMomentsResolved,
			"Binding moments resolved, by policy, consequence class, decision class and resolution kind (option, answer, question, declined; envelope-04 §7.3).", "kind"),
		expired: counter(NameMomentsExpired, "Binding moments that expired unresolved."),
		hatchDisabled: counter(NameMomentsHatchDisabled,
			"Binding moments emitted with an escape hatch disabled (envelope-04 §12.3), by hatch: free_text (answer space) or dialogue (question space).", "hatch"),
		calibration: counter(NameMomentsCalibrationNote, "Binding moments emitted with meta.calibration_note (envelope-04 §5.9)."),
		resolution: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: NameMomentResolution, Help: "Time from a binding moment's emission to its final resolution, by resolution kind.",
			Buckets: ResolutionBuckets(),
		}, []string{"kind"}),
	}
}

func (m *Moments) base(x Moment) []string {
	return []string{policy(x.Policy), class(x.Class), m.l.decisionClass(x.DecisionClass)}
}

// Emitted counts a moment emitted, its disabled hatches and its calibration note. A nil Moments
// records nothing.
func (m *Moments) Emitted(x Moment) {
	if m == nil {
		return
	}
	b := m.base(x)
	m.emitted.WithLabelValues(b...).Inc()
	if !x.FreeTextHatch {
		m.hatchDisabled.WithLabelValues(append(b, string(HatchFreeText))...).Inc()
	}
	if !x.DialogueHatch {
		m.hatchDisabled.WithLabelValues(append(b, string(HatchDialogue))...).Inc()
	}
	if x.CalibrationNote {
		m.calibration.WithLabelValues(b...).Inc()
	}
}

// Resolved counts a moment's final resolution of kind (option, answer, question, declined) and
// observes the time since emission (negative times, from clock skew, are observed as 0).
func (m *Moments) Resolved(x Moment, kind string, sinceEmission time.Duration) {
	if m == nil {
		return
	}
	kind = resolutionKind(kind)
	m.resolved.WithLabelValues(append(m.base(x), kind)...).Inc()
	m.resolution.WithLabelValues(kind).Observe(max(sinceEmission, 0).Seconds())
}

// Expired counts a moment that expired unresolved.
func (m *Moments) Expired(x Moment) {
	if m == nil {
		return
	}
	m.expired.WithLabelValues(m.base(x)...).Inc()
}

// Surface label values besides the surfaces of v1alpha1 (SurfaceApprovalService,
// SurfaceConsole, SurfaceKubectl).
const (
	// SurfaceUnknown: the resolution names no surface.
	SurfaceUnknown = "unknown"
	// SurfaceOther: a surface outside actgate's own. resolution.via.surface is the writing
	// client's word, so the label keeps a closed set of values however many a client invents.
	SurfaceOther = "other"
)

// ResolutionSurface is the label value of a resolution.via.surface.
func ResolutionSurface(s string) string {
	switch s {
	case "":
		return SurfaceUnknown
	case v1alpha1.SurfaceApprovalService, v1alpha1.SurfaceConsole, v1alpha1.SurfaceKubectl:
		return s
	}
	return SurfaceOther
}

// Resolutions are the manager's BindingMoment resolutions by the surface that wrote them
// (docs/operations.md "Metrics and Events"), counted once, by the BindingMoment controller, in
// the status write that records the resolution:
//
//   - actgate_bindingmoment_resolutions_total{surface,kind}
//   - actgate_bindingmoment_time_to_resolution_seconds{surface}: the announcement's delivery
//     (the Announced condition) or, without one, the moment's creation, to its resolution
//
// surface is approval-service, console, kubectl, other or unknown (ResolutionSurface); kind
// is option, answer, question or declined (envelope-04 §7.3).
type Resolutions struct {
	total *prometheus.CounterVec
	time  *prometheus.HistogramVec
}

// NewResolutions creates the resolution metrics and registers them with reg.
func NewResolutions(reg prometheus.Registerer) (*Resolutions, error) {
	r := &Resolutions{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{Name: NameBindingMomentResolutions,
			Help: "BindingMoment resolutions recorded, by the surface that wrote them and resolution kind (envelope-04 §7.3)."}, []string{"surface", "kind"}),
		time: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: NameBindingMomentTimeToResolution,
			Help:    "Time from a BindingMoment's announcement (else its creation) to its resolution, by the surface that wrote it.",
			Buckets: ResolutionBuckets()}, []string{"surface"}),
	}
	if err := register(reg, r.total, r.time); err != nil {
		return nil, err
	}
	return r, nil
}

// Resolved counts one resolution through surface of kind and observes the time since the
// announcement (negative times, from clock skew, are observed as 0). A nil Resolutions records
// nothing.
func (r *Resolutions) Resolved(surface, kind string, sinceAnnouncement time.Duration) {
	if r == nil {
		return
	}
	surface = ResolutionSurface(surface)
	r.total.WithLabelValues(surface, resolutionKind(kind)).Inc()
	r.time.WithLabelValues(surface).Observe(max(sinceAnnouncement, 0).Seconds())
}

// Gate is the metrics of one finality sink and its sink.Observer:
//
//   - actgate_enforce_duration_seconds{path}: receipt of the call to its answer, invocation
//     included (sink.CallEvent.Duration), by Path
//   - actgate_decisions_total{decision,code,class}
//   - actgate_side_effect_denies_total{code,class} (see the package doc for the definition)
//   - actgate_indeterminate_outstanding{source="journal"}: the journal's INDETERMINATE records,
//     as counted by SeedIndeterminate at start plus the calls that ended INDETERMINATE since
//   - the Moments metrics of the moments the gate emits, resolves and expires
//   - actgate_refusal_records_dropped_total: refusals decided in a pod whose Act record was
//     dropped because the sidecar's bounded queue of records was full (RefusalRecordDropped).
//   - actgate_tool_definition_changes_total{server,tool}: changed definitions of pinned tools
//     (ToolDefinitionChanged, toolpins.go).
type Gate struct {
	l             *labels
	duration      *prometheus.HistogramVec
	decisions     *prometheus.CounterVec
	sideEffect    *prometheus.CounterVec
	mcpServer     *prometheus.HistogramVec
	mcpClient     *prometheus.HistogramVec
	moments       *Moments
	indeterminate atomic.Int64
	dropped       prometheus.Counter
	toolChanges   *prometheus.CounterVec // actgate_tool_definition_changes_total (toolpins.go)
}

// NameRefusalRecordsDropped is the counter of refusal records a pod's sidecar dropped.
const NameRefusalRecordsDropped = "actgate_refusal_records_dropped_total"

// RefusalRecordDropped counts one refusal whose Act record the sidecar dropped (its queue of
// records to the authority service was full).
func (g *Gate) RefusalRecordDropped() {
	if g != nil {
		g.dropped.Inc()
	}
}

var _ sink.Observer = (*Gate)(nil)

// NewGate creates a finality sink's metrics, its Moments included, and registers them with reg.
func NewGate(reg prometheus.Registerer) (*Gate, error) {
	l := newLabels()
	g := &Gate{
		l: l,
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: NameEnforceDuration, Help: "Time from receipt of a tool call to its answer, invocation included, by enforcement path (hot, permit, escalate, deny, audit).",
			Buckets: EnforceBuckets(),
		}, []string{"path"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: NameDecisions, Help: "Tool calls answered by the sink, by decision, EF code and consequence class.",
		}, []string{"decision", "code", "class"}),
		sideEffect: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: NameSideEffectDenies, Help: "Tool calls refused (not invoked) whose consequence class is known and not INFORMATIONAL: denies that would have been side effects.",
		}, []string{"code", "class"}),
		mcpServer: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: NameMCPServerOperationDuration, Help: "MCP tools/call duration as the gate observes it from the agent's side, " +
				"from receipt to answer (OpenTelemetry mcp.server.operation.duration); error_type is the EF code of a refusal.",
			Buckets: MCPBuckets(),
		}, mcpLabels),
		mcpClient: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: NameMCPClientOperationDuration, Help: "MCP tools/call duration of the gate's call of the upstream " +
				"(OpenTelemetry mcp.client.operation.duration); error_type is the outcome when it is not EXECUTED.",
			Buckets: MCPBuckets(),
		}, mcpLabels),
		moments: newMoments(l),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: NameRefusalRecordsDropped,
			Help: "Refusals decided in the pod whose Act record was dropped: the sidecar's bounded queue of records was full.",
		}),
		toolChanges: newToolChanges(),
	}
	ind := &countCollector{
		desc: indeterminateDesc(),
		src:  SourceJournal,
		count: func(context.Context) (int, error) {
			return int(g.indeterminate.Load()), nil
		},
	}
	m := g.moments
	if err := register(reg, g.duration, g.decisions, g.sideEffect, g.dropped, ind, g.mcpServer, g.mcpClient, g.toolChanges,
		m.emitted, m.resolved, m.expired, m.hatchDisabled, m.calibration, m.resolution); err != nil {
		return nil, err
	}
	return g, nil
}

// Moments returns the gate's moment metrics.
func (g *Gate) Moments() *Moments { return g.moments }

// InStater lists journal records by state (journal.Journal has it).
type InStater interface {
	InState(ctx context.Context, s journal.State) ([]journal.DispatchRecord, error)
}

// SeedIndeterminate sets the outstanding INDETERMINATE count from the journal. Call it once
// the gate is built (sink.New has recovered in-flight dispatches to INDETERMINATE) and before
// serving; from then on each call that ends INDETERMINATE adds one. Nothing in a finality sink
// moves a record out of INDETERMINATE (authenticated reconciliation runs elsewhere), so the
// count is exact for the life of the process.
func (g *Gate) SeedIndeterminate(ctx context.Context, j InStater) error {
	recs, err := j.InState(ctx, journal.StateIndeterminate)
	if err != nil {
		return err
	}
	g.indeterminate.Store(int64(len(recs)))
	return nil
}

// PathOf is the enforcement path of an answered call.
func PathOf(e sink.CallEvent) Path {
	switch {
	case e.Audit:
		return PathAudit
	case e.Outcome == sink.PolicyEscalate:
		return PathEscalate
	case !e.Allowed:
		return PathDeny
	case e.Outcome == sink.PolicyAllow:
		return PathHot
	case e.Outcome == sink.PolicyPermit:
		return PathPermit
	}
	return PathDeny
}

// DecisionOf is the decision label of an answered call.
func DecisionOf(e sink.CallEvent) Decision {
	switch {
	case e.Audit && e.Code != "":
		return DecisionAuditDenied
	case e.Replayed:
		return DecisionReplayed
	case e.Allowed:
		return DecisionAllowed
	case e.Code == ef.EFEscalationRequired:
		return DecisionEscalated
	}
	return DecisionDenied
}

// mcpLabels are the MCP duration histograms' labels, the conventions' attribute names as
// Prometheus writes them. gen_ai.tool.name is left out: an agent names its tools, so a label of
// it would be unbounded (traces carry it).
var mcpLabels = []string{"mcp_method_name", "gen_ai_operation_name", "error_type"}

// MCPBuckets are the explicit bucket boundaries the MCP semantic conventions give its duration
// histograms, in seconds.
func MCPBuckets() []float64 {
	return []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}
}

// SideEffectDeny reports whether an answered call is a deny that would have been a side
// effect (see the package doc).
func SideEffectDeny(e sink.CallEvent) bool {
	return !e.Allowed && !e.Invoked && e.Class != "" && e.Class != act.ClassInformational
}

// CallDecided implements sink.Observer.
func (g *Gate) CallDecided(e sink.CallEvent) {
	code, cls := g.l.code(e.Code), class(e.Class)
	g.duration.WithLabelValues(string(PathOf(e))).Observe(e.Duration.Seconds())
	g.decisions.WithLabelValues(string(DecisionOf(e)), code, cls).Inc()
	if SideEffectDeny(e) {
		g.sideEffect.WithLabelValues(code, cls).Inc()
	}
	if e.Vendor == act.VendorMCP {
		g.mcpServer.WithLabelValues(tracing.MethodToolsCall, tracing.OperationExecuteTool, code).Observe(e.Duration.Seconds())
		if e.Invoked {
			errType := ""
			if e.State != "" && e.State != journal.StateExecuted {
				errType = string(e.State)
			}
			g.mcpClient.WithLabelValues(tracing.MethodToolsCall, tracing.OperationExecuteTool, errType).Observe(e.Invocation.Seconds())
		}
	}
	// A new dispatch that ended INDETERMINATE; a refused retry of one carries the state too but
	// was not invoked.
	if e.Invoked && e.State == journal.StateIndeterminate {
		g.indeterminate.Add(1)
	}
}

// MomentEmitted implements sink.Observer.
func (g *Gate) MomentEmitted(e sink.MomentEvent) { g.moments.Emitted(FromEvent(e)) }

// MomentResolved implements sink.Observer.
func (g *Gate) MomentResolved(e sink.MomentEvent, r sink.ResolutionEvent) {
	g.moments.Resolved(FromEvent(e), r.Kind, r.At.Sub(e.Created))
}

// MomentExpired implements sink.Observer.
func (g *Gate) MomentExpired(e sink.MomentEvent) { g.moments.Expired(FromEvent(e)) }

// Reconciliation counts authenticated reconciliation attempts:
// actgate_reconciliation_results_total{result}, result one of Executed, Failed, Unknown, Stale,
// Malformed, Mismatch, Unauthenticated, Unreachable (internal/reconcile findings) or
// NotConfigured (no usable endpoint; nothing was asked).
type Reconciliation struct {
	results *prometheus.CounterVec
}

// Reconciliation results that are not findings of internal/reconcile.
const ResultNotConfigured = reconcile.ResultNotConfigured

var reconciliationResults = map[string]bool{
	"Executed": true, "Failed": true, "Unknown": true, "Stale": true, "Malformed": true,
	"Mismatch": true, "Unauthenticated": true, "Unreachable": true, ResultNotConfigured: true,
}

// NewReconciliation creates the reconciliation metric and registers it with reg.
func NewReconciliation(reg prometheus.Registerer) (*Reconciliation, error) {
	r := &Reconciliation{results: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: NameReconciliationResults,
		Help: "Reconciliation attempts of INDETERMINATE acts by result; only Executed and Failed settle an act.",
	}, []string{"result"})}
	if err := register(reg, r.results); err != nil {
		return nil, err
	}
	return r, nil
}

// Observe counts one attempt's result. A nil Reconciliation records nothing.
func (r *Reconciliation) Observe(result string) {
	if r == nil {
		return
	}
	if !reconciliationResults[result] {
		result = ResultOther
	}
	r.results.WithLabelValues(result).Inc()
}

// RegisterIndeterminate registers actgate_indeterminate_outstanding{source} whose value count
// returns at scrape time, within timeout. When count fails the sample is left out of that
// scrape (absent, never a guessed number).
func RegisterIndeterminate(reg prometheus.Registerer, source string, timeout time.Duration, count func(context.Context) (int, error)) error {
	return register(reg, &countCollector{desc: indeterminateDesc(), src: source, timeout: timeout, count: count})
}

func indeterminateDesc() *prometheus.Desc {
	return prometheus.NewDesc(NameIndeterminate,
		"INDETERMINATE dispatches outstanding: their outcome is unknown until authenticated reconciliation (source journal: this sink's journal; acts: the cluster's Acts).",
		[]string{"source"}, nil)
}

// countCollector is a gauge whose value is asked for at scrape time.
type countCollector struct {
	desc    *prometheus.Desc
	src     string
	timeout time.Duration
	count   func(context.Context) (int, error)
}

func (c *countCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *countCollector) Collect(ch chan<- prometheus.Metric) {
	ctx := context.Background()
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	n, err := c.count(ctx)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), c.src)
}

// Replacing returns a Registerer that, when a collector with the same descriptors is already
// registered with reg, unregisters it and registers the new one instead of failing. It is for
// a process-wide registry (controller-runtime's metrics.Registry) that a component may be
// wired into more than once in one process, as a restarted manager in a test is.
func Replacing(reg prometheus.Registerer) prometheus.Registerer { return replacing{reg} }

type replacing struct{ prometheus.Registerer }

func (r replacing) Register(c prometheus.Collector) error {
	err := r.Registerer.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		r.Registerer.Unregister(are.ExistingCollector)
		return r.Registerer.Register(c)
	}
	return err
}

func (r replacing) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}
