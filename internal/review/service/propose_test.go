package service

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actgate/actgate/api/v1alpha1"
)

// TestOptionOn: a moment's option offers a call only on the option's own server and
// destination (its calls, one per option); a moment without calls offers its options on the
// server and destination its annotations name; calls that are not one per option offer nothing.
func TestOptionOn(t *testing.T) {
	twoServers := &v1alpha1.BindingMoment{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationServer: "payments", AnnotationDestination: "https://pay"}},
		Spec: v1alpha1.BindingMomentSpec{Calls: []v1alpha1.BindingMomentCall{
			{Server: "payments", Destination: "https://pay", Tool: "send_payment", Args: "{}"},
			{Server: "ledger", Destination: "https://ledger", Tool: "hold_invoice", Args: "{}"},
		}},
	}
	noCalls := &v1alpha1.BindingMoment{ObjectMeta: twoServers.ObjectMeta}
	on := func(server, dest string) *call { return &call{server: server, destination: dest} }
	for _, tc := range []struct {
		name string
		m    *v1alpha1.BindingMoment
		n, i int
		x    *call
		want bool
	}{
		{"first option on its server", twoServers, 2, 0, on("payments", "https://pay"), true},
		{"second option on its server", twoServers, 2, 1, on("ledger", "https://ledger"), true},
		{"second option on the annotations' server", twoServers, 2, 1, on("payments", "https://pay"), false},
		{"first option on the other server", twoServers, 2, 0, on("ledger", "https://ledger"), false},
		{"right server, another destination", twoServers, 2, 1, on("ledger", "https://elsewhere"), false},
		{"calls not one per option", twoServers, 3, 1, on("ledger", "https://ledger"), false},
		{"no calls: the annotations' server", noCalls, 2, 1, on("payments", "https://pay"), true},
		{"no calls: another server", noCalls, 2, 1, on("ledger", "https://ledger"), false},
	} {
		if got := optionOn(tc.m, tc.n, tc.i, tc.x); got != tc.want {
			t.Errorf("%s: optionOn = %v, want %v", tc.name, got, tc.want)
		}
	}
}
