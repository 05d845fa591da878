package kubecache

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actgate/actgate/api/v1alpha1"
)

// labelSession is a label the moments are listed by (the service's LabelSession).
const labelSession = "actgate.io/session"

func newMoment(ns, name, session string) *v1alpha1.BindingMoment {
	return &v1alpha1.BindingMoment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{labelSession: session}}}
}

func recentNames(items []v1alpha1.BindingMoment) []string {
	var out []string
	for _, m := range items {
		out = append(out, m.Namespace+"/"+m.Name)
	}
	return out
}

// TestRecentMoments: a moment this service created is added to a read that does not show it,
// only for its namespace and label value, until a read shows it or the TTL passes; at most
// recentMomentsMax are remembered.
func TestRecentMoments(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	r := NewRecentMoments(func() time.Time { return now })
	r.Add(newMoment("a", "bm-1", "s1"))
	r.Add(newMoment("a", "bm-2", "s2"))
	r.Add(newMoment("b", "bm-3", "s1"))

	if got := recentNames(r.Merge("a", labelSession, "s1", nil)); len(got) != 1 || got[0] != "a/bm-1" {
		t.Fatalf("a read of a/s1 that shows nothing: %v, want a/bm-1", got)
	}
	if got := recentNames(r.Merge("a", labelSession, "s3", nil)); len(got) != 0 {
		t.Fatalf("another session: %v", got)
	}
	// A read that shows the moment gets it once, and the moment is forgotten.
	read := []v1alpha1.BindingMoment{*newMoment("a", "bm-1", "s1")}
	if got := recentNames(r.Merge("a", labelSession, "s1", read)); len(got) != 1 {
		t.Fatalf("a read that shows the moment: %v", got)
	}
	if got := recentNames(r.Merge("a", labelSession, "s1", nil)); len(got) != 0 {
		t.Fatalf("a moment a read showed is still added: %v", got)
	}
	// After the TTL nothing is added.
	now = now.Add(recentMomentsTTL)
	if got := recentNames(r.Merge("b", labelSession, "s1", nil)); len(got) != 0 {
		t.Fatalf("after the TTL: %v", got)
	}

	// Bounded: a moment that does not fit is not remembered; expired ones make room.
	for i := range recentMomentsMax + 10 {
		r.Add(newMoment("c", fmt.Sprintf("bm-%d", i), "s"))
	}
	if n := len(r.Merge("c", labelSession, "s", nil)); n != recentMomentsMax {
		t.Fatalf("%d remembered, want the bound %d", n, recentMomentsMax)
	}
	now = now.Add(recentMomentsTTL)
	r.Add(newMoment("d", "bm-late", "s"))
	if got := recentNames(r.Merge("d", labelSession, "s", nil)); len(got) != 1 {
		t.Fatalf("after the full set expired: %v", got)
	}
}

// TestRecentActs: an Act is taken once, as it was added (a copy, without its field managers),
// in its own namespace only, and not after the TTL; at most recentActsMax are remembered.
func TestRecentActs(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	r := NewRecent[*v1alpha1.Act](func() time.Time { return now }, RecentActsMax, RecentActsTTL)
	a := &v1alpha1.Act{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "act-1", ResourceVersion: "7",
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "actgate-authority"}}}}
	r.Add(a)
	a.ResourceVersion = "8"
	if _, ok := r.Take("b", "act-1"); ok {
		t.Fatal("taken from another namespace")
	}
	got, ok := r.Take("a", "act-1")
	if !ok || got.ResourceVersion != "7" || got.ManagedFields != nil {
		t.Fatalf("take: %v %+v", ok, got)
	}
	if _, ok := r.Take("a", "act-1"); ok {
		t.Fatal("taken twice")
	}
	r.Add(a)
	now = now.Add(RecentActsTTL)
	if _, ok := r.Take("a", "act-1"); ok {
		t.Fatal("taken after the TTL")
	}
	for i := range RecentActsMax + 10 {
		r.Add(&v1alpha1.Act{ObjectMeta: metav1.ObjectMeta{Namespace: "c", Name: fmt.Sprintf("act-%d", i)}})
	}
	if n := len(r.m); n != RecentActsMax {
		t.Fatalf("%d remembered, want the bound %d", n, RecentActsMax)
	}
	if _, ok := r.Take("c", fmt.Sprintf("act-%d", RecentActsMax+5)); ok {
		t.Fatal("an Act past the bound was remembered")
	}
}
