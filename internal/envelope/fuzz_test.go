package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// seedFiles adds every render input and the conformance envelope as seeds.
func seedFiles(f *testing.F) [][]byte {
	var out [][]byte
	paths, _ := filepath.Glob("testdata/render/*.json")
	paths = append(paths, "testdata/conformance/envelope.canonical.json")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// checkAccepted asserts what must hold of every accepted envelope: its canonical bytes
// and its re-marshalled content parse to the same digest, and it renders.
func checkAccepted(t *testing.T, env *Envelope) {
	again, err := Parse(env.Canonical())
	if err != nil || again.Digest() != env.Digest() {
		t.Fatalf("canonical bytes re-parse: %v", err)
	}
	viaJSON, err := json.Marshal(env.Content())
	if err != nil {
		t.Fatal(err)
	}
	again, err = Parse(viaJSON)
	if err != nil || again.Digest() != env.Digest() {
		t.Fatalf("re-marshalled content re-parse: %v", err)
	}
	if n := env.NumOptions(); n < MinOptions || n > MaxOptions || env.RecommendedIdx() < 0 || env.RecommendedIdx() >= n {
		t.Fatalf("accepted envelope breaks §5.6/§5.7: %d options, recommended %d", n, env.RecommendedIdx())
	}
	if err := (TextRenderer{}).Render(io.Discard, env); err != nil {
		t.Fatal(err)
	}
}

// checkRejected asserts a rejection is a *ValidationError with at least one coded problem.
func checkRejected(t *testing.T, err error) {
	problems := ProblemsOf(err)
	if len(problems) == 0 {
		t.Fatalf("rejection without problems: %v", err)
	}
	for _, p := range problems {
		if p.Code == "" || p.Path == "" || p.Path[0] != '$' || bytes.ContainsAny([]byte(p.String()), "\n\r") {
			t.Fatalf("bad problem %#v", p)
		}
		if p.Code == CodeInternal {
			t.Fatalf("internal inconsistency: %v", err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, b := range seedFiles(f) {
		f.Add(b)
	}
	f.Add([]byte(`{"synopsis":"a","synopsis":"b"}`))
	f.Add([]byte(`{"question":{"recommended_idx":1.0,"options":[]}}`))
	f.Add([]byte(`"\ud800"`))
	f.Add([]byte(`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		env, err := Parse(raw)
		if err != nil {
			if env != nil {
				t.Fatal("envelope and error both returned")
			}
			checkRejected(t, err)
			return
		}
		checkAccepted(t, env)
	})
}

func FuzzFromToolResult(f *testing.F) {
	for _, b := range seedFiles(f) {
		f.Add(b)
	}
	f.Add([]byte(`{"binding_moment":{},"binding\u005fmoment":{}}`))
	f.Add([]byte(`{"content":[{"type":"text","text":"x"}],"binding_moment":null}`))
	f.Add([]byte(`{"binding_moment":{`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		env, fallback, err := FromToolResult(raw)
		switch {
		case err == nil:
			if env == nil {
				t.Fatal("no envelope and no error")
			}
			checkAccepted(t, env)
			// The same member read through ParseDocument names the same envelope.
			if again, err := ParseDocument(raw); err != nil || again.Digest() != env.Digest() {
				t.Fatalf("ParseDocument disagrees: %v", err)
			}
		case errors.Is(err, ErrNoEnvelope):
			if env != nil {
				t.Fatal("envelope returned with ErrNoEnvelope")
			}
		default:
			if env != nil {
				t.Fatal("malformed envelope returned")
			}
			checkRejected(t, err)
			var buf bytes.Buffer
			if rerr := (TextRenderer{}).RenderFallback(&buf, fallback, ProblemsOf(err)); rerr != nil {
				t.Fatal(rerr)
			}
		}
	})
}

func FuzzParseResolution(f *testing.F) {
	f.Add([]byte(`{"binding_moment_resolution":{"envelope_digest":"` + exampleDigest + `","resolution":"option","option_idx":1}}`))
	f.Add([]byte(`{"binding_moment_resolution":{"envelope_digest":"` + exampleDigest + `","resolution":"answer","answer":"x"}}`))
	f.Add([]byte(`{"envelope_digest":"` + exampleDigest + `","resolution":"question"}`))
	f.Add([]byte(`{"envelope_digest":"` + exampleDigest + `","resolution":"declined","option_idx":0}`))
	f.Add([]byte(`{"binding_moment_resolution":{},"x":1}`))
	env, err := Parse(mustRead(f, "testdata/conformance/envelope.canonical.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := ParseResolution(raw)
		if err != nil {
			if r != nil {
				t.Fatal("resolution and error both returned")
			}
			checkRejected(t, err)
			return
		}
		// The §7.3 conditional members hold of everything accepted.
		if !r.Kind.Valid() || (r.Kind != KindOption && r.OptionIdx != 0) || (r.Kind != KindAnswer && r.Answer != "") {
			t.Fatalf("accepted resolution breaks §7.3: %+v", *r)
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseResolution(b)
		if err != nil || *again != *r {
			t.Fatalf("round trip: %+v %v", again, err)
		}
		// Only an option can ever be authority, whatever the action.
		_, aerr := Authorize(env, r, Action{Tool: "booking.share", Args: json.RawMessage(`{}`)})
		if r.Kind != KindOption && !HasCode(aerr, CodeResNotAuthority) && !HasCode(aerr, CodeResEnvelopeMismatch) {
			t.Fatalf("%s resolution: Authorize = %v", r.Kind, aerr)
		}
	})
}

func FuzzParseAction(f *testing.F) {
	f.Add([]byte(`{"tool":"payment.release","args":{"amount_usd":4000}}`))
	f.Add([]byte(`{"tool":"","args":[]}`))
	f.Add([]byte(`{"tool":"a","args":{"x":1.5}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		a, err := ParseAction(raw)
		if err != nil {
			checkRejected(t, err)
			return
		}
		if a.Tool == "" || !isObjectText(a.Args) {
			t.Fatalf("accepted %+v", a)
		}
	})
}

func mustRead(f *testing.F, path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	return b
}
