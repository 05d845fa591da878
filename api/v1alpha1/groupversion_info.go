package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of every actgate kind.
const GroupName = "actgate.io"

// GroupVersion is the group and version of this package's kinds.
var GroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

// Resource returns the GroupResource of a resource of this group, e.g. Resource("acts").
func Resource(resource string) schema.GroupResource {
	return GroupVersion.WithResource(resource).GroupResource()
}

// AddToScheme registers ToolPolicy, Act, BindingMoment, ReceiptAnchor and BudgetLedger (and their lists) with s.
//
// It is a plain function rather than a SchemeBuilder filled by init(): the package holds no
// mutable state, and callers build their own scheme:
//
//	s := runtime.NewScheme()
//	_ = clientgoscheme.AddToScheme(s)
//	_ = v1alpha1.AddToScheme(s)
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&ToolPolicy{}, &ToolPolicyList{},
		&Act{}, &ActList{},
		&BindingMoment{}, &BindingMomentList{},
		&ReceiptAnchor{}, &ReceiptAnchorList{},
		&BudgetLedger{}, &BudgetLedgerList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
