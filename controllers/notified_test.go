package controllers

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// TestNotified: an act is notified once per reason and object; a recreated act (new UID) and a
// reason forgotten (the act left INDETERMINATE) are notified again.
func TestNotified(t *testing.T) {
	var n notified
	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	steps := []struct {
		name   string
		do     func() bool
		want   bool
		forget string // forget this reason ("*" = all) before the step
	}{
		{"first Denied", func() bool { return n.first(notifiedKey{a, "u1", EventDenied}) }, true, ""},
		{"Denied again", func() bool { return n.first(notifiedKey{a, "u1", EventDenied}) }, false, ""},
		{"Indeterminate is another reason", func() bool { return n.first(notifiedKey{a, "u1", EventIndeterminate}) }, true, ""},
		{"recreated act", func() bool { return n.first(notifiedKey{a, "u2", EventDenied}) }, true, ""},
		{"after forgetting Indeterminate", func() bool { return n.first(notifiedKey{a, "u1", EventIndeterminate}) }, true, EventIndeterminate},
		{"Denied kept when Indeterminate forgotten", func() bool { return n.first(notifiedKey{a, "u2", EventDenied}) }, false, EventIndeterminate},
		{"after deletion", func() bool { return n.first(notifiedKey{a, "u2", EventDenied}) }, true, "*"},
	}
	for _, s := range steps {
		switch s.forget {
		case "*":
			n.forget(a, "")
		case "":
		default:
			n.forget(a, s.forget)
		}
		if got := s.do(); got != s.want {
			t.Fatalf("%s: first = %v, want %v", s.name, got, s.want)
		}
	}
	n.forget(a, "")
	if len(n.acts) != 0 {
		t.Fatalf("entries left after deletion: %v", n.acts)
	}
}
