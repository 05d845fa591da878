package action

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/actgate/actgate/internal/jcs"
)

// FuzzCanonical: never panics; an accepted action is canonical, agrees with
// canonicalizing Material, and Strict acceptance implies identical Full
// bytes; when args is one JSON object and the assembled material
// canonicalizes, Canonical accepts too.
func FuzzCanonical(f *testing.F) {
	f.Add("payment.release", []byte(`{"amount_usd":4000,"beneficiary":"vendor@example.com","memo":"invoice 7781"}`))
	f.Add("ledger.post", []byte(`{"amount":0,"rate":1.5,"count":-7}`))
	f.Add("t", []byte(`1,"zzz":2`))
	f.Add("", []byte(`{}`))
	f.Add("a\xff", []byte(`{"a":{"a":[]}}`))
	f.Fuzz(func(t *testing.T, tool string, args []byte) {
		var outs [2][]byte
		for i, mode := range []jcs.Mode{jcs.Strict, jcs.Full} {
			out, err := Canonical(tool, args, mode)
			viaMaterial, mErr := jcs.Canonicalize(Material(tool, args), mode)
			if err != nil {
				if _, ok := CodeOf(err); !ok {
					t.Fatalf("%v: error without a code: %v", mode, err)
				}
				if tool != "" && mErr == nil && json.Valid(args) && bytes.HasPrefix(bytes.TrimLeft(args, " \t\r\n"), []byte("{")) {
					t.Fatalf("%v: refused %q %q (%v) but the material canonicalizes", mode, tool, args, err)
				}
				continue
			}
			outs[i] = out
			if mErr != nil || !bytes.Equal(out, viaMaterial) {
				t.Fatalf("%v: Canonical %q, via Material %q, %v", mode, out, viaMaterial, mErr)
			}
			again, err := jcs.Canonicalize(out, mode)
			if err != nil || !bytes.Equal(again, out) {
				t.Fatalf("%v: %q is not a fixed point: %q, %v", mode, out, again, err)
			}
		}
		if outs[0] != nil && !bytes.Equal(outs[0], outs[1]) {
			t.Fatalf("Strict %q but Full %q", outs[0], outs[1])
		}
	})
}
