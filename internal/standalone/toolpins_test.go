package standalone

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/sink"
)

var (
	digestA = strings.Repeat("a", 64)
	digestB = strings.Repeat("b", 64)
)

// TestParseToolPinsRefuses: a pin file that is not exactly the documented shape is refused
// with an error naming the defect, never read as fewer (or other) pins.
func TestParseToolPinsRefuses(t *testing.T) {
	entry := func(server, tool, digest string) string {
		return fmt.Sprintf(`{"server":%q,"tool":%q,"sha256":%q,"time":"2026-01-01T00:00:00Z"}`, server, tool, digest)
	}
	for _, tc := range []struct{ name, doc, want string }{
		{"not JSON", `{`, "unexpected EOF"},
		{"unknown member", `{"pins":[],"pending":[],"extra":1}`, "unknown field"},
		{"unknown entry member", `{"pins":[{"server":"s","tool":"t","sha256":"` + digestA + `","accepted":true}]}`, "unknown field"},
		{"trailing document", `{"pins":[]} {}`, "content after"},
		{"short digest", `{"pins":[` + entry("s", "t", "abc") + `]}`, "sha256"},
		{"uppercase digest", `{"pins":[` + entry("s", "t", strings.ToUpper(digestA)) + `]}`, "sha256"},
		{"prefixed digest", `{"pins":[` + entry("s", "t", "sha256:"+digestA) + `]}`, "sha256"},
		{"empty server", `{"pins":[` + entry("", "t", digestA) + `]}`, "server"},
		{"empty tool", `{"pending":[` + entry("s", "", digestA) + `]}`, "tool"},
		{"duplicate", `{"pins":[` + entry("s", "t", digestA) + `,` + entry("s", "t", digestB) + `]}`, "second entry"},
		{"unknown member digest", `{"pins":[{"server":"s","tool":"t","sha256":"` + digestA + `","members":{"_meta":"` + digestA + `"}}]}`, "members"},
		{"bad member digest", `{"pins":[{"server":"s","tool":"t","sha256":"` + digestA + `","members":{"description":"x"}}]}`, "members"},
		{"too many", `{"pins":[` + strings.TrimSuffix(strings.Repeat(entry("s", "t", digestA)+",", MaxToolPins+1), ",") + `]}`, "more than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := ParseToolPins([]byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %+v, %v; want an error containing %q", d, err, tc.want)
			}
		})
	}
	if _, err := ParseToolPins([]byte(`{"pins":[` + entry("s", "t", digestA) + `],"pending":[` + entry("s", "t", digestB) + `]}`)); err != nil {
		t.Fatalf("a pin and a pending change of one tool: %v", err)
	}
}

// FuzzParseToolPins: any bytes parse to a checked document or an error, never a panic.
func FuzzParseToolPins(f *testing.F) {
	f.Add([]byte(`{"pins":[{"server":"s","tool":"t","sha256":"` + digestA + `","members":{"description":"` + digestB + `"}}],"pending":[]}`))
	f.Add([]byte(`{"pins":null}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseToolPins(b)
		if err != nil {
			return
		}
		for _, e := range append(d.Pins, d.Pending...) {
			if e.check() != nil {
				t.Fatalf("accepted an entry that does not check: %+v", e)
			}
		}
	})
}

// TestToolPinsStore: first use records once, a change is pending, accept moves the pending
// digest to the pins (and refuses another digest), and a second store on the same data dir
// (another process: actgate tools accept) sees every write.
func TestToolPinsStore(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	gate, cli := OpenToolPins(dir), OpenToolPins(dir)
	r, err := gate.RecordFirstUse(ctx, sink.PinRecord{Server: "s", Tool: "t", Digest: digestA, AcceptedBy: sink.PinFirstUse, AcceptedAt: time.Now()})
	if err != nil || r.Digest != digestA {
		t.Fatalf("first use: %+v, %v", r, err)
	}
	if r, err := gate.RecordFirstUse(ctx, sink.PinRecord{Server: "s", Tool: "t", Digest: digestB}); err != nil || r.Digest != digestA {
		t.Fatalf("a second first use replaced the pin: %+v, %v", r, err)
	}
	if _, err := cli.Accept("s", "t", "", "op"); !errors.Is(err, ErrNoPendingChange) {
		t.Fatalf("accept with nothing pending: %v", err)
	}
	if err := gate.RecordChange(ctx, sink.PinRecord{Server: "s", Tool: "t", Digest: digestB}); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Accept("s", "t", digestA, "op"); !errors.Is(err, ErrDigestNotPending) {
		t.Fatalf("accepting a digest other than the pending one: %v", err)
	}
	if e, err := cli.Accept("s", "t", digestB, "op"); err != nil || e.SHA256 != digestB || e.AcceptedBy != "op" {
		t.Fatalf("accept: %+v, %v", e, err)
	}
	if r, ok, err := gate.Pinned(ctx, "s", "t"); err != nil || !ok || r.Digest != digestB {
		t.Fatalf("the gate's store after accept: %+v %v %v", r, ok, err)
	}
	doc, err := gate.Doc()
	if err != nil || len(doc.Pending) != 0 || len(doc.Pins) != 1 {
		t.Fatalf("document after accept: %+v, %v", doc, err)
	}
}
