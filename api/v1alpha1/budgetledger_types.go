package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaxLedgerCharges bounds BudgetLedgerStatus.Charges: the operations whose charge a ledger
// remembers, so that a retried charge of the same operation is not counted twice and its refund
// finds what to give back. Older entries are forgotten first; forgetting one can only make the
// ledger count more, never less (docs/architecture.md "Budgets in Kubernetes").
const MaxLedgerCharges = 128

// LabelBudgetPolicy names the ToolPolicy on every BudgetLedger, so one policy's ledgers are listed
// by label.
const LabelBudgetPolicy = "actgate.io/policy"

// BudgetLedgerSpec names what one ledger counts: one budget of one rule of one ToolPolicy, for
// one key, in one window. It is written once, when the first charge of the window creates the
// ledger, and never changes.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable: a ledger counts one budget, key and window"
// +kubebuilder:validation:XValidation:rule="self.windowEnd > self.windowStart",message="windowEnd is after windowStart"
// +kubebuilder:validation:XValidation:rule="has(self.limitCount) || has(self.limitSum)",message="a ledger has a count limit, a sum limit or both"
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
	// +kubebuilder:validation:MaxLength=253
	Budget string `json:"budget"`

	// key is the budget key's value this ledger counts for (an agent, a pod, a namespace, the
	// policy, or the digest of a CEL key's value: never a raw argument).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Key string `json:"key"`

	// windowStart is the start of the window counted (inclusive).
	// +required
	WindowStart metav1.Time `json:"windowStart"`

	// windowEnd is the end of the window counted (exclusive); after it the ledger is swept.
	// +required
	WindowEnd metav1.Time `json:"windowEnd"`

	// limitCount is the most calls the window allows, when the budget limits a count.
	// +optional
	// +kubebuilder:validation:Minimum=0
	LimitCount *int64 `json:"limitCount,omitempty"`

	// limitSum is the largest sum of the budget's argument the window allows, an exact decimal,
	// when the budget limits a sum.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
	LimitSum string `json:"limitSum,omitempty"`
}

// LedgerCharge is what one operation was charged in a ledger.
type LedgerCharge struct {
	// operation is the id of the operation (the dispatch) charged.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Operation string `json:"operation"`

	// count is the number of calls charged (1).
	// +required
	// +kubebuilder:validation:Minimum=0
	Count int64 `json:"count"`

	// sum is the amount charged, an exact decimal ("0" for a count-only budget).
	// +required
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
	Sum string `json:"sum"`

	// at is when the charge was made.
	// +required
	At metav1.Time `json:"at"`
}

// BudgetLedgerStatus is what the window has spent. Only the authority service writes it, by
// compare-and-swap on the object's resourceVersion.
type BudgetLedgerStatus struct {
	// spentCount is the number of calls charged in the window and not refunded.
	// +optional
	// +kubebuilder:validation:Minimum=0
	SpentCount int64 `json:"spentCount,omitempty"`

	// spentSum is the sum charged in the window and not refunded, an exact decimal.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
	SpentSum string `json:"spentSum,omitempty"`

	// spent and remaining are spentCount/spentSum and what the limits leave, for `kubectl get`.
	// +optional
	// +kubebuilder:validation:MaxLength=160
	Spent string `json:"spent,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=160
	Remaining string `json:"remaining,omitempty"`

	// charges are the newest operations charged and not refunded, newest last, at most
	// MaxLedgerCharges.
	// +optional
	// +listType=map
	// +listMapKey=operation
	// +kubebuilder:validation:MaxItems=128
	Charges []LedgerCharge `json:"charges,omitempty"`
}

// BudgetLedger counts one budget of a ToolPolicy rule (spec.rules[].budgets[]) for one key in
// one window: the one truth every sidecar and every authority replica shares. The authority
// service charges it when a call's authority is consumed and refunds it when the call fails
// (docs/architecture.md "Budgets in Kubernetes"); its name is a digest of policy, rule, budget,
// key and window start; the ToolPolicy owns it, and it is deleted after its window ends.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=bl,categories=actgate
// +kubebuilder:printcolumn:name="Policy",type=string,JSONPath=`.spec.policy`
// +kubebuilder:printcolumn:name="Budget",type=string,JSONPath=`.spec.budget`
// +kubebuilder:printcolumn:name="Key",type=string,JSONPath=`.spec.key`
// +kubebuilder:printcolumn:name="Spent",type=string,JSONPath=`.status.spent`
// +kubebuilder:printcolumn:name="Remaining",type=string,JSONPath=`.status.remaining`
// +kubebuilder:printcolumn:name="Window-End",type=string,JSONPath=`.spec.windowEnd`
// +kubebuilder:printcolumn:name="Rule",type=string,JSONPath=`.spec.rule`,priority=1
// +kubebuilder:printcolumn:name="Window-Start",type=string,JSONPath=`.spec.windowStart`,priority=1
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
