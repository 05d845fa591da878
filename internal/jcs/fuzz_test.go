package jcs

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"testing"

	gowebpki "github.com/gowebpki/jcs"
)

func addSeeds(f *testing.F) {
	for _, s := range []string{
		`{"b":[1,2,{"d":null,"c":true}],"a":"x"}`,
		`{"a":1,"\u0061":2}`,
		`{"s":"\ud83d\ude00\ud800"}`,
		`[1.5,1e21,-0,1.0,9007199254740992,1e400,5e-324]`,
		"{\"\uff61\":1,\"\U0001F600\":2}",
		"\xEF\xBB\xBF{}",
		"\"\xed\xa0\x80\"",
		`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`,
		`"\u0000\b\t\n\f\r\"\\\/"`,
	} {
		f.Add([]byte(s))
	}
}

// FuzzCanonicalize checks, for any input: no panic; an accepted input's
// canonical form is a fixed point in the mode that produced it; whatever
// Strict accepts Full accepts with identical bytes; whatever Full accepts
// is valid JSON to encoding/json and decodes to the same value as the
// input; where gowebpki/jcs also accepts, both produce the same bytes.
func FuzzCanonicalize(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		strict, strictErr := Canonicalize(in, Strict)
		full, fullErr := Canonicalize(in, Full)
		for _, r := range []struct {
			mode Mode
			out  []byte
			err  error
		}{{Strict, strict, strictErr}, {Full, full, fullErr}} {
			if r.err != nil {
				if _, ok := CodeOf(r.err); !ok {
					t.Fatalf("%v: error without a code: %v", r.mode, r.err)
				}
				if r.out != nil {
					t.Fatalf("%v: output %q returned with error %v", r.mode, r.out, r.err)
				}
				continue
			}
			again, err := Canonicalize(r.out, r.mode)
			if err != nil || !bytes.Equal(again, r.out) {
				t.Fatalf("%v: canonical form %q re-canonicalizes to %q, %v", r.mode, r.out, again, err)
			}
		}
		if strictErr == nil && (fullErr != nil || !bytes.Equal(strict, full)) {
			t.Fatalf("Strict accepted %q as %q but Full gave %q, %v", in, strict, full, fullErr)
		}
		if fullErr != nil {
			return
		}
		if !json.Valid(full) {
			t.Fatalf("Full output %q is not valid JSON", full)
		}
		var vin, vout any
		if err := json.Unmarshal(in, &vin); err != nil {
			t.Fatalf("encoding/json rejects input %q that Full accepted: %v", in, err)
		}
		if err := json.Unmarshal(full, &vout); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(vin, vout) {
			t.Fatalf("input %q and canonical %q decode to different values", in, full)
		}
		if ref, err := gowebpki.Transform(in); err == nil && !bytes.Equal(ref, full) {
			t.Fatalf("gowebpki/jcs gives %q, this package %q for %q", ref, full, in)
		}
	})
}

// FuzzES6Number checks the number formatter against gowebpki/jcs
// NumberToJSON and checks that its output parses back to the same double.
func FuzzES6Number(f *testing.F) {
	for _, bits := range []uint64{0, 1, 0x8000000000000001, 0x444b1ae4d6e2ef50, 0x3eb0c6f7a0b5ed8c, 0x7fefffffffffffff, 0x4340000000000000} {
		f.Add(bits)
	}
	f.Fuzz(func(t *testing.T, bits uint64) {
		v := math.Float64frombits(bits)
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return
		}
		got := appendES6(nil, v)
		want, err := gowebpki.NumberToJSON(v)
		if err != nil || string(got) != want {
			t.Fatalf("appendES6(%v) = %s, NumberToJSON = %s, %v", v, got, want, err)
		}
		out, err := Canonicalize(got, Full)
		if err != nil || !bytes.Equal(out, got) {
			t.Fatalf("Canonicalize(%s) = %s, %v", got, out, err)
		}
	})
}
