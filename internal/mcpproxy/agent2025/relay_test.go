package agent2025

import (
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TestLegs: a replayed response is mapped to the agent's id only for one of the session's own
// legs still in the ring; any other id (another session's leg, a leg whose slot a later one
// took, an id the gate never sends) is not.
func TestLegs(t *testing.T) {
	id := func(v any) jsonrpc.ID {
		i, err := jsonrpc.MakeID(v)
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	b := &bridge{}
	b.legs.add(id("actgate-5"), id(float64(1)))
	b.legs.add(id("actgate-7"), id("a"))
	b.legs.add(id("x-9"), id("b")) // not a leg id: not recorded
	for _, tc := range []struct {
		up    jsonrpc.ID
		agent jsonrpc.ID
		ok    bool
	}{
		{id("actgate-5"), id(float64(1)), true},
		{id("actgate-7"), id("a"), true},
		{id("actgate-6"), jsonrpc.ID{}, false},
		{id("actgate-1029"), jsonrpc.ID{}, false}, // slot 5, another leg
		{id("x-9"), jsonrpc.ID{}, false},
		{id(float64(5)), jsonrpc.ID{}, false},
		{id("actgate-"), jsonrpc.ID{}, false},
		{id("actgate-0"), jsonrpc.ID{}, false},
		{id("actgate-05"), jsonrpc.ID{}, false}, // another id than actgate-5
		{id("actgate-+5"), jsonrpc.ID{}, false},
		{id("actgate-99999999999999999999999"), jsonrpc.ID{}, false},
	} {
		got, ok := b.legAgent(tc.up)
		if ok != tc.ok || (ok && got != tc.agent) {
			t.Errorf("legAgent(%v) = %v, %v; want %v, %v", tc.up.Raw(), got.Raw(), ok, tc.agent.Raw(), tc.ok)
		}
	}
	b.legs.add(id(fmt.Sprintf("actgate-%d", 5+maxRelayed)), id("c")) // takes leg 5's slot
	if _, ok := b.legAgent(id("actgate-5")); ok {
		t.Error("a leg whose slot a later leg took is still mapped")
	}
	if got, ok := b.legAgent(id(fmt.Sprintf("actgate-%d", 5+maxRelayed))); !ok || got != id("c") {
		t.Errorf("the later leg: %v, %v", got.Raw(), ok)
	}
	if _, ok := (&bridge{}).legAgent(id("actgate-5")); ok {
		t.Error("a session without legs mapped one")
	}
}

// FuzzLegSeq: an upstream's response id (untrusted) never panics the leg parser, and one it
// accepts is exactly actgate-N with N > 0.
func FuzzLegSeq(f *testing.F) {
	for _, s := range []string{"actgate-1", "actgate-18446744073709551615", "actgate-18446744073709551616", "actgate-", "actgate--1", "actgate-s-1", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := jsonrpc.MakeID(s)
		if err != nil {
			return
		}
		n, ok := legSeq(id)
		if ok && (n == 0 || fmt.Sprintf("actgate-%d", n) != s) {
			t.Fatalf("legSeq(%q) = %d", s, n)
		}
	})
}
