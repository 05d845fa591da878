package argmask

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/actgate/actgate/internal/jcs"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"/card", []string{"card"}},
		{"/card/number", []string{"card", "number"}},
		{"/a~1b/c~0d", []string{"a/b", "c~d"}},
		{"/items/0", []string{"items", "0"}},
	} {
		got, err := Parse(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("Parse(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for name, in := range map[string]string{
		"empty":          "",
		"no slash":       "card",
		"empty token":    "/card//number",
		"trailing slash": "/card/",
		"bad escape":     "/a~2",
		"dangling tilde": "/a~",
		"append token":   "/items/-",
		"too long":       "/" + strings.Repeat("a", MaxPointerBytes),
		"too deep":       strings.Repeat("/a", MaxPointerTokens+1),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Parse(in); !errors.Is(err, ErrPointer) {
				t.Fatalf("Parse(%q) = %v; want ErrPointer", in, err)
			}
		})
	}
}

func TestApply(t *testing.T) {
	for _, tc := range []struct {
		name, args string
		pointers   []string
		want       string
		hit        []string
	}{
		{"top-level", `{"to":"bob","card":"4111111111111111"}`, []string{"/card"},
			`{"card":"` + Placeholder + `","to":"bob"}`, []string{"/card"}},
		{"nested and array", `{"p":{"ids":["a","b"]},"n":1}`, []string{"/p/ids/1", "/p/ids/1"},
			`{"n":1,"p":{"ids":["a","` + Placeholder + `"]}}`, []string{"/p/ids/1"}},
		{"absent member", `{"to":"bob"}`, []string{"/card", "/to/x", "/to/0"}, `{"to":"bob"}`, nil},
		{"index out of range and leading zero", `{"a":[1,2]}`, []string{"/a/2", "/a/01"}, `{"a":[1,2]}`, nil},
		{"escaped name", `{"a/b":1,"c~d":2}`, []string{"/a~1b", "/c~0d"},
			`{"a/b":"` + Placeholder + `","c~d":"` + Placeholder + `"}`, []string{"/a~1b", "/c~0d"}},
		{"whole object value", `{"card":{"n":"1","cvv":"2"},"x":true}`, []string{"/card"},
			`{"card":"` + Placeholder + `","x":true}`, []string{"/card"}},
		{"no pointers: canonical", `{ "b" : 1, "a" : 2 }`, nil, `{"a":2,"b":1}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, hit, err := Apply(json.RawMessage(tc.args), tc.pointers)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want || !slices.Equal(hit, tc.hit) {
				t.Fatalf("Apply = %s %q; want %s %q", got, hit, tc.want, tc.hit)
			}
		})
	}
}

func TestApplyRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		args     string
		pointers []string
	}{
		"not an object":   {`[1]`, []string{"/0"}},
		"out of profile":  {`{"a":1.5}`, []string{"/a"}},
		"duplicate names": {`{"a":1,"a":2}`, []string{"/a"}},
		"bad pointer":     {`{"a":1}`, []string{"a"}},
		"not JSON":        {`{"a":`, []string{"/a"}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, _, err := Apply(json.RawMessage(tc.args), tc.pointers); err == nil {
				t.Fatal("Apply accepted it")
			}
		})
	}
}

// FuzzApply: Apply never panics, and what it returns is canonical JSON in the strict profile
// whose masked pointers all hold Placeholder.
func FuzzApply(f *testing.F) {
	f.Add(`{"card":{"number":"4111"},"to":"bob"}`, "/card/number")
	f.Add(`{"a":[1,2,{"b":3}]}`, "/a/2/b")
	f.Add(`{"a~/":1}`, "/a~0~1")
	f.Fuzz(func(t *testing.T, args, pointer string) {
		out, hit, err := Apply(json.RawMessage(args), []string{pointer})
		if err != nil {
			return
		}
		again, err := jcs.Canonicalize(out, jcs.Strict)
		if err != nil || string(again) != string(out) {
			t.Fatalf("Apply returned non-canonical %s (%v)", out, err)
		}
		if len(hit) > 0 {
			// Masking twice changes nothing more.
			out2, hit2, err := Apply(out, hit)
			if err != nil || string(out2) != string(out) || !slices.Equal(hit2, hit) {
				t.Fatalf("masking again: %s %q %v", out2, hit2, err)
			}
		}
	})
}
