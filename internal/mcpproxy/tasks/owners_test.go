package tasks

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestCreatedTaskOf: what the owners table reads of a tools/call answer, bad input included:
// a task id of any length, of the revision's shape only; anything else is no task.
func TestCreatedTaskOf(t *testing.T) {
	long := strings.Repeat("i", 4096)
	for _, tc := range []struct {
		raw  string
		rev  bool
		id   string
		ttl  time.Duration
		name string
	}{
		{`{"task":{"taskId":"t","ttl":1000}}`, false, "t", time.Second, "2025"},
		{`{"task":{"taskId":"` + long + `"}}`, false, long, MaxTTL, "2025 long id, no ttl"},
		{`{"resultType":"task","taskId":"t","ttlMs":5}`, true, "t", 5 * time.Millisecond, "2026"},
		{`{"resultType":"task","taskId":"t","ttlMs":-1}`, true, "t", MaxTTL, "2026 negative ttl"},
		{`{"resultType":"task","taskId":"t"}`, false, "", 0, "2026 shape on 2025"},
		{`{"task":{"taskId":"t"}}`, true, "", 0, "2025 shape on 2026"},
		{`{"resultType":"complete","taskId":"t"}`, true, "", 0, "not a task"},
		{`{"task":{"taskId":7}}`, false, "", 0, "number id"},
		{`{"task":{"taskId":""}}`, false, "", 0, "empty id"},
		{`{"task":null}`, false, "", 0, "null task"},
		{`[1,2]`, false, "", 0, "array"},
		{`{"task":`, false, "", 0, "truncated"},
		{``, true, "", 0, "empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, ttl := CreatedTaskOf(json.RawMessage(tc.raw), tc.rev)
			if id != tc.id || ttl != tc.ttl {
				t.Fatalf("CreatedTaskOf(%.80s) = %.20q, %v; want %.20q, %v", tc.raw, id, ttl, tc.id, tc.ttl)
			}
		})
	}
}

// FuzzCreatedTaskOf: no answer makes the reader panic, and an id it reads is the string the
// answer holds.
func FuzzCreatedTaskOf(f *testing.F) {
	for _, s := range []string{`{"task":{"taskId":"t","ttl":1}}`, `{"resultType":"task","taskId":"t","ttlMs":1e300}`, `{"task":{"taskId":"\u0000"}}`, `null`} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, raw []byte, rev bool) {
		id, ttl := CreatedTaskOf(raw, rev)
		if id == "" && ttl != 0 || ttl < 0 || ttl > MaxTTL {
			t.Fatalf("CreatedTaskOf(%q) = %q, %v", raw, id, ttl)
		}
	})
}

// TestOwnersExpire: expired entries free their places (a sweep at the bound), and an expired
// Owner is no owner.
func TestOwnersExpire(t *testing.T) {
	o := Owners{Max: 3, MaxPerAgent: 2} // small bounds, so that the test reaches them
	for range 2 {
		if !o.Reserve("x") {
			t.Fatal("reserve under the bound")
		}
	}
	o.Settle("x", "t-1", time.Millisecond)
	o.Settle("x", "", 0)
	if o.Owner("t-1") != "x" || !o.Foreign("y", "t-1") || o.Foreign("x", "t-1") {
		t.Fatal("owner of a live task")
	}
	time.Sleep(5 * time.Millisecond)
	if o.Owner("t-1") != "" || o.total != 0 {
		t.Fatalf("an expired task: owner %q, %d places held", o.Owner("t-1"), o.total)
	}
}
