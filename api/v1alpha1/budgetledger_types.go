package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaxLedgerOps bounds BudgetLedgerStatus.Ops: the charges a ledger holds individually, so that a
// retried charge of the same operation is not counted twice and a FAILED call's refund finds
// what to give back. When a charge would pass the bound the oldest is folded into the settled
// buckets first: a refund that comes after that gives nothing back, so the ledger can only count
// more than was spent, never less (docs/architecture.md "Budgets in Kubernetes"). The bound
// keeps the object, which every charge rewrites, small.
const MaxLedgerOps = 32

// MaxLedgerBuckets bounds BudgetLedgerStatus.Settled: one per sub-bucket of a rolling window
// still counting (internal/budget SubBuckets, 60) and one to spare.
const MaxLedgerBuckets = 64

// Labels of every BudgetLedger: the ToolPolicy it counts for, and its budget's scope (a prefix
// of the scope digest of namespace, policy, rule and budget), so the keys of one budget are
// counted by label.
const (
	LabelBudgetPolicy = "actgate.io/policy"
	LabelBudgetScope  = "actgate.io/budget-scope"
)

// BudgetLedgerSpec names what one ledger counts: one budget of one rule of one ToolPolicy, for
// one key, in one calendar window or over a rolling window. It is written once, when the first
// charge creates the ledger, and never changes.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable: a ledger counts one budget and key"
type BudgetLedgerSpec struct {
	// policy is the name of the ToolPolicy declaring the budget (its owner).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Policy string `json:"policy"`

	// rule is the name of the policy's rule the budget belongs to.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Rule string `json:"rule"`

	// budget is the budget's name within the rule.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Budget string `json:"budget"`

	// key is the budget key's value this ledger counts for: an agent, a service account, the
	// namespace, the policy, or what the budget's key expression returned for the call.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Key string `json:"key"`

	// scope is the digest of namespace, policy, rule and budget that the ledgers of one budget
	// share.
	// +required
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	Scope string `json:"scope"`
}

// LedgerOp is one charge the ledger holds individually, until it is settled or refunded.
type LedgerOp struct {
	// id is the operation (the dispatch) charged.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	ID string `json:"id"`

	// until is when the charge stops counting (the calendar window's end, or for a rolling
	// window its sub-bucket's end plus the period).
	// +required
	Until metav1.Time `json:"until"`

	// count is the number of calls charged (1).
	// +required
	// +kubebuilder:validation:Minimum=0
	Count int64 `json:"count"`

	// amount is the sum charged, an exact decimal ("0" for a budget without a sum).
	// +required
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
	Amount string `json:"amount"`

	// enforced is false for a charge a person approved past the limit.
	// +optional
	Enforced bool `json:"enforced,omitempty"`
}

// LedgerBucket aggregates settled charges that stop counting at the same instant.
type LedgerBucket struct {
	// until is when the bucket's charges stop counting.
	// +required
	Until metav1.Time `json:"until"`

	// count is the number of calls in the bucket.
	// +required
	// +kubebuilder:validation:Minimum=0
	Count int64 `json:"count"`

	// amount is the sum of the bucket, an exact decimal.
	// +required
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
	Amount string `json:"amount"`
}

// BudgetLedgerStatus is what the budget's key has spent. Only the authority service writes it,
// by compare-and-swap on the object's resourceVersion.
type BudgetLedgerStatus struct {
	// spent and remaining state, for `kubectl get`, the calls and the sum that count now and
	// what the limits leave ("3 calls, 1200.50 EUR"), as of the last charge or refund.
	// +optional
	// +kubebuilder:validation:MaxLength=160
	Spent string `json:"spent,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=160
	Remaining string `json:"remaining,omitempty"`

	// windowEnd is the end of the newest charge's window.
	// +optional
	WindowEnd *metav1.Time `json:"windowEnd,omitempty"`

	// maxCalls, maxSum and unit are the limits the newest charge was made under.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxCalls int64 `json:"maxCalls,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
	MaxSum string `json:"maxSum,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Unit string `json:"unit,omitempty"`

	// settled are the aggregates of charges no longer held individually, by when they stop
	// counting.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Settled []LedgerBucket `json:"settled,omitempty"`

	// ops are the charges held individually, oldest first, at most MaxLedgerOps.
	// +optional
	// +listType=map
	// +listMapKey=id
	// +kubebuilder:validation:MaxItems=32
	Ops []LedgerOp `json:"ops,omitempty"`
}

// BudgetLedger counts one budget of a ToolPolicy rule (spec.rules[].budgets[]) for one key: the
// one truth every sidecar and every authority replica shares. The authority service charges it
// when a call's authority is consumed and refunds it when the call fails (docs/architecture.md
// "Budgets in Kubernetes"). Its name is the budget package's ledger id (a digest of namespace,
// policy, rule, budget, key and window); the ToolPolicy owns it, and it is deleted once nothing
// in it counts any more.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=bl,categories=actgate
// +kubebuilder:printcolumn:name="Policy",type=string,JSONPath=`.spec.policy`
// +kubebuilder:printcolumn:name="Budget",type=string,JSONPath=`.spec.budget`
// +kubebuilder:printcolumn:name="Key",type=string,JSONPath=`.spec.key`
// +kubebuilder:printcolumn:name="Spent",type=string,JSONPath=`.status.spent`
// +kubebuilder:printcolumn:name="Remaining",type=string,JSONPath=`.status.remaining`
// +kubebuilder:printcolumn:name="Window-End",type=string,JSONPath=`.status.windowEnd`
// +kubebuilder:printcolumn:name="Rule",type=string,JSONPath=`.spec.rule`,priority=1
type BudgetLedger struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec BudgetLedgerSpec `json:"spec"`
	// +optional
	Status BudgetLedgerStatus `json:"status,omitempty"`
}

// BudgetLedgerList is a list of BudgetLedgers.
// +kubebuilder:object:root=true
type BudgetLedgerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BudgetLedger `json:"items"`
}
