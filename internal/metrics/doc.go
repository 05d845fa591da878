// Package metrics holds actgate's Prometheus metrics for the finality sink and for binding
// moments, registered on a prometheus.Registerer the caller gives (never a global registry):
//
//   - Gate implements sink.Observer for one finality sink (`actgate serve`, the sidecar): enforce
//     latency by path, decisions by decision, EF code and consequence class, denies of calls that
//     would have been side effects, INDETERMINATE dispatches outstanding in the sink's journal,
//     and, through Moments, the veto signals of the moments the gate emits.
//   - Moments counts binding moments (envelope-04): emitted, resolved by kind, expired, envelopes
//     with a hatch disabled (§12.3), envelopes carrying meta.calibration_note (§5.9), and the
//     time from emission to resolution. The question-space hatch rate of §12.2 is
//     resolved{kind="question"} / resolved, per policy and decision class (a PromQL ratio; see
//     config/prometheus/rules.yaml and config/grafana/actgate-dashboard.json). The manager's
//     BindingMoment controller uses Moments for the cluster's moments.
//   - Reconciliation counts authenticated reconciliation attempts by result (the manager's Act
//     controller).
//   - RegisterIndeterminate exposes a count taken at scrape time (the manager's INDETERMINATE
//     Acts).
//
// # Bounded labels
//
// Every label takes its value from a closed or operator-controlled set: decisions, paths,
// EF codes (an unknown code is reported as "EF_OTHER"), consequence classes (tool-use-binding
// §20; anything else is "OTHER", none is "UNCLASSIFIED"), resolution kinds (envelope-04 §7.3),
// hatches, reconciliation results and policy names (ToolPolicy names, which only the operator
// creates). meta.decision_class is written by the agent (envelope-04 §5.9), so it is
// normalised: lower-cased, at most MaxDecisionClassLen characters of [a-z0-9_.-], else "other";
// no meta.decision_class is "none"; and at most MaxDecisionClasses distinct values are kept per
// process, later ones being "other". Act ids, digests, principals, agents, tools and argument
// values are never labels.
//
// # "Denies that would have been side effects"
//
// actgate_side_effect_denies_total counts every call the sink refused — not allowed and not
// invoked, escalations and refused retries of INDETERMINATE acts included, audit mode excluded
// (audit mode lets calls through) — whose consequence class is known and is not INFORMATIONAL
// (tool-use-binding §20: every other class changes or discloses something outside the agent).
// A call refused before it could be classified (EF_ACT_INVALID, a call missing its session)
// is not counted: what it would have done is unknown. Filter code!="EF_ESCALATION_REQUIRED" for
// the calls refused for good.
//
// # Request path
//
// Gate's Observer methods run synchronously on the sink's request path: they only update
// in-memory collectors (atomic adds, a short mutex for the decision-class set) and never block.
package metrics
