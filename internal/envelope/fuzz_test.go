package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/actgate/actgate/internal/action"
	"github.com/actgate/actgate/internal/jcs"
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
	f.Add([]byte(`{"synopsis":"","findings":[],"recommendations":[],"offer":"\n","question":{"stem":"s","options":[{"label":"a","reasoning":"r","action_digest":"sha256:` + exampleActionA[7:] + `"},{"label":"a","reasoning":"r","action_digest":"sha256:` + exampleActionA[7:] + `"}],"recommended_idx":1,"hatches":{"free_text":false,"dialogue":true}},"meta":{"decision_class":""}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		env, err := Parse(raw)
		senv, serr := ParseSpec(raw)
		if err != nil {
			if env != nil {
				t.Fatal("envelope and error both returned")
			}
			checkRejected(t, err)
			// Parse refuses a well-formed envelope only under the actgate profile, and
			// then exactly with what CheckProfile reports.
			var ve *ValidationError
			profileOnly := errors.As(err, &ve) && ve.ProfileOnly()
			if (serr == nil) != profileOnly {
				t.Fatalf("ParseSpec error %v, Parse error %v (profile only %v)", serr, err, profileOnly)
			}
			if serr == nil {
				perr := senv.CheckProfile()
				if !reflect.DeepEqual(ProblemsOf(perr), ProblemsOf(err)) {
					t.Fatalf("CheckProfile %v, Parse %v", perr, err)
				}
				if rerr := (TextRenderer{}).Render(io.Discard, senv); rerr == nil {
					t.Fatal("rendered an envelope outside the profile")
				}
			} else {
				checkRejected(t, serr)
			}
			return
		}
		checkAccepted(t, env)
		if serr != nil || senv.Digest() != env.Digest() || senv.CheckProfile() != nil {
			t.Fatalf("ParseSpec disagrees with Parse: %v", serr)
		}
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
	f.Add([]byte(`{"envelope_digest":"` + exampleDigest + `","resolution":"answer","answer":"\u001b"}`))
	act, err := ParseAction(mustRead(f, "testdata/conformance/action_a.canonical.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := ParseResolution(raw)
		sr, serr := ParseResolutionSpec(raw)
		// §7.3: whatever is accepted was the wrapper with exactly one member.
		if err == nil || serr == nil {
			var top map[string]json.RawMessage
			if jerr := json.Unmarshal(raw, &top); jerr != nil || len(top) != 1 || top[MemberResolution] == nil {
				t.Fatalf("accepted without the %s wrapper: %q", MemberResolution, raw)
			}
		}
		if err != nil {
			if r != nil {
				t.Fatal("resolution and error both returned")
			}
			checkRejected(t, err)
			// Only the answer's profile separates the two.
			var ve *ValidationError
			if profileOnly := errors.As(err, &ve) && ve.ProfileOnly(); (serr == nil) != profileOnly || (serr == nil && sr.Kind != KindAnswer) {
				t.Fatalf("ParseResolutionSpec %+v %v, ParseResolution %v", sr, serr, err)
			}
			if serr != nil {
				checkRejected(t, serr)
			}
			return
		}
		if serr != nil || *sr != *r {
			t.Fatalf("ParseResolutionSpec disagrees: %+v %v", sr, serr)
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
		g, aerr := Authorize(env, r, act)
		if r.Kind != KindOption && !HasCode(aerr, CodeResNotAuthority) && !HasCode(aerr, CodeResEnvelopeMismatch) {
			t.Fatalf("%s resolution: Authorize = %v", r.Kind, aerr)
		}
		// action_a of §6.4 is authority through option 0 of its envelope only.
		if (aerr == nil) != (r.Kind == KindOption && r.EnvelopeDigest == exampleDigest && r.OptionIdx == 0) || (aerr == nil && g.ActionDigest != exampleActionA) {
			t.Fatalf("Authorize(%+v, action_a) = %+v, %v", *r, g, aerr)
		}
	})
}

func FuzzParseAction(f *testing.F) {
	f.Add([]byte(`{"tool":"payment.release","args":{"amount_usd":4000}}`))
	f.Add([]byte(`{"tool":"","args":[]}`))
	f.Add([]byte(`{"tool":"a","args":{"x":1.5}}`))
	f.Add(mustRead(f, "testdata/spec-6.4/action_a.json"))
	f.Add([]byte(`{"recipient":"a","recipi\u0065nt":"b"}`))
	f.Add([]byte(`"\ud800"`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		a, err := ParseAction(raw)
		if err != nil {
			if a.Digest() != "" {
				t.Fatal("action and error both returned")
			}
			checkRejected(t, err)
			return
		}
		// The digest is over the strict canonical form of the action itself (§5.6, §6.2),
		// and the canonical bytes read back as the same action.
		canonical, cerr := jcs.Canonicalize(raw, jcs.Strict)
		if cerr != nil || !bytes.Equal(a.Canonical(), canonical) || a.Digest() != jcs.Digest(canonical) {
			t.Fatalf("accepted %q as %s (%v)", raw, a.Digest(), cerr)
		}
		if again, err := ParseAction(a.Canonical()); err != nil || again.Digest() != a.Digest() {
			t.Fatalf("canonical re-parse: %v", err)
		}
	})
}

func FuzzToolCall(f *testing.F) {
	f.Add("payment.release", []byte(`{"amount_usd":4000,"beneficiary":"vendor@example.com","memo":"invoice 7781"}`))
	f.Add("", []byte(`{}`))
	f.Add("t", []byte(`[]`))
	f.Add("t t", []byte(`{"x":1.5}`))
	f.Add("t", []byte(`{"a":1,"\u0061":2}`))
	f.Add("t", []byte(`1,"x":2`))
	f.Fuzz(func(t *testing.T, tool string, args []byte) {
		a, err := ToolCall(tool, args)
		if err != nil {
			if a.Digest() != "" {
				t.Fatal("action and error both returned")
			}
			checkRejected(t, err)
			return
		}
		// The tool call's digest is EP-TOOL-CALL-BINDING-v1's, and reading its canonical
		// bytes as any JSON action gives the same digest.
		want, derr := action.Digest(tool, args, jcs.Strict)
		if derr != nil || a.Digest() != want {
			t.Fatalf("ToolCall digest %s, action.Digest %s %v", a.Digest(), want, derr)
		}
		if again, err := ParseAction(a.Canonical()); err != nil || again.Digest() != want {
			t.Fatalf("ParseAction of the canonical tool call: %v", err)
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
