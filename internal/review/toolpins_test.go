package review

import (
	"errors"
	"strings"
	"testing"

	"github.com/actgate/actgate/internal/tooldef"
)

func toolPinBody(members string) string {
	return `{"apiVersion":"` + APIVersion + `","kind":"` + ToolPinKind + `",` + members + `}`
}

// TestDecodeToolPinReport: the service decodes exactly the documented report; anything else
// is a FieldError naming the member, never a partial report.
func TestDecodeToolPinReport(t *testing.T) {
	d := strings.Repeat("a", 64)
	ok := `"server":"payments","tool":"get_balance","sha256":"` + d + `","members":{"description":"` + d + `"},"changed":true`
	r, err := DecodeToolPinReport([]byte(toolPinBody(ok)))
	if err != nil || r.Server != "payments" || r.Tool != "get_balance" || r.SHA256 != d || !r.Changed || r.Members["description"] != d {
		t.Fatalf("a good report: %+v, %v", r, err)
	}
	for _, tc := range []struct{ name, body, field string }{
		{"not JSON", `{`, "$"},
		{"wrong kind", `{"apiVersion":"` + APIVersion + `","kind":"ActReview","server":"s","tool":"t","sha256":"` + d + `"}`, "kind"},
		{"unknown member", toolPinBody(ok + `,"pin":true`), "$"},
		{"duplicate member", toolPinBody(ok + `,"tool":"other"`), "$"},
		{"server not a DNS label", toolPinBody(`"server":"Pay_ments","tool":"t","sha256":"` + d + `"`), "server"},
		{"server too long", toolPinBody(`"server":"` + strings.Repeat("a", 64) + `","tool":"t","sha256":"` + d + `"`), "server"},
		{"empty tool", toolPinBody(`"server":"s","tool":"","sha256":"` + d + `"`), "tool"},
		{"tool with a space", toolPinBody(`"server":"s","tool":"get balance","sha256":"` + d + `"`), "tool"},
		{"tool too long", toolPinBody(`"server":"s","tool":"` + strings.Repeat("t", 129) + `","sha256":"` + d + `"`), "tool"},
		{"prefixed digest", toolPinBody(`"server":"s","tool":"t","sha256":"sha256:` + d + `"`), "sha256"},
		{"upper-case digest", toolPinBody(`"server":"s","tool":"t","sha256":"` + strings.ToUpper(d) + `"`), "sha256"},
		{"unknown member digest", toolPinBody(`"server":"s","tool":"t","sha256":"` + d + `","members":{"_meta":"` + d + `"}`), "members"},
		{"bad member digest", toolPinBody(`"server":"s","tool":"t","sha256":"` + d + `","members":{"title":"x"}`), "members"},
		{"too large", toolPinBody(`"server":"s","tool":"t","sha256":"` + d + `","x":"` + strings.Repeat("x", MaxToolPinBytes) + `"`), "$"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := DecodeToolPinReport([]byte(tc.body))
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Fatalf("got %+v, %v; want a FieldError of %s", r, err, tc.field)
			}
		})
	}
}

// FuzzDecodeToolPinReport: any bytes decode to a checked report or a FieldError, never a panic.
func FuzzDecodeToolPinReport(f *testing.F) {
	d := strings.Repeat("a", 64)
	f.Add([]byte(toolPinBody(`"server":"payments","tool":"get_balance","sha256":"` + d + `","members":{"description":"` + d + `"}`)))
	f.Add([]byte(toolPinBody(`"server":"s","tool":"t","sha256":"` + d + `","changed":true`)))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeToolPinReport(b)
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a FieldError", err)
			}
			return
		}
		if !tooldef.IsDigest(r.SHA256) || r.Server == "" || r.Tool == "" || len(r.Tool) > 128 {
			t.Fatalf("accepted %+v", r)
		}
	})
}
