package eventlog

import (
	"fmt"
	"strings"
	"testing"

	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

func TestParseIDBadInput(t *testing.T) {
	for _, tc := range []struct {
		id  string
		key string
		n   int
		ok  bool
	}{
		{"actgate:g12-0", "12", 0, true},
		{"actgate:g1-42", "1", 42, true},
		{"", "", 0, false},
		{"g1-1", "", 0, false}, // an upstream's id
		{"actgate:g", "", 0, false},
		{"actgate:g-1", "", 0, false},
		{"actgate:g1-", "", 0, false},
		{"actgate:g1--1", "", 0, false},
		{"actgate:g1-+1", "", 0, false},
		{"actgate:g+1-1", "", 0, false},
		{"actgate:g1-1-1", "", 0, false},
		{"actgate:gx-1", "", 0, false},
		{"actgate:G1-1", "", 0, false},
		{"Actgate:g1-1", "", 0, false},
		{"actgate:1:x", "", 0, false},    // the GET stream's own id
		{"actgate:u:g1-1", "", 0, false}, // an escaped upstream id
		{"actgate:u:actgate:g1-1", "", 0, false},
		{"abc_3", "", 0, false},                           // the SDK's form
		{"actgate:g1_3", "", 0, false},                    // the SDK's form, a stream named g1
		{"actgate:g1-99999999999999999999", "", 0, false}, // beyond int
		{"actgate:g" + strings.Repeat("1", 80) + "-1", "", 0, false},
		{"actgate:g1-1\x00", "", 0, false},
		{"actgate:g١-1", "", 0, false}, // a non-ASCII digit
	} {
		key, n, ok := ParseID(tc.id)
		if key != tc.key || n != tc.n || ok != tc.ok {
			t.Errorf("ParseID(%q) = %q, %d, %v; want %q, %d, %v", tc.id, key, n, ok, tc.key, tc.n, tc.ok)
		}
	}
}

// FuzzParseID: no input panics; an accepted id is exactly actgate:g{key}-{n} again.
func FuzzParseID(f *testing.F) {
	for _, s := range []string{"actgate:g1-0", "actgate:g12-3", "x_1", "actgate:g-", "actgate:g1-1-1", "actgate:g99999999999999999999-1", "actgate:u:x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		key, n, ok := ParseID(id)
		if ok && fmt.Sprintf("actgate:g%s-%d", key, n) != id && !strings.HasPrefix(strings.TrimPrefix(id, "actgate:g"+key+"-"), "0") {
			t.Fatalf("ParseID(%q) accepted %q, %d", id, key, n)
		}
		if ok && n < 0 {
			t.Fatalf("ParseID(%q): negative index %d", id, n)
		}
	})
}

// FuzzCheckLastEventID: no Last-Event-ID panics the check; an accepted one is within the bound
// and can be written as an id field, and an empty Set finds no log for any.
func FuzzCheckLastEventID(f *testing.F) {
	for _, s := range []string{"", "up-1", "x_0", "actgate:g1-0", "actgate:u:actgate:1:x", "a\x00", "a\nb", strings.Repeat("y", wire.MaxEventID+1)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if CheckLastEventID(id) != nil {
			return
		}
		if len(id) > wire.MaxEventID || strings.ContainsAny(id, "\x00\r\n") {
			t.Fatalf("CheckLastEventID(%q) accepted it", id)
		}
		if l, _ := (&Set{}).For(id); l != nil {
			t.Fatalf("For(%q) found a log in a set without any", id)
		}
	})
}
