package budget

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestParseDecimal(t *testing.T) {
	good := []struct{ in, want string }{
		{"0", "0"}, {"0.0", "0"}, {"1", "1"}, {"10000.00", "10000"}, {"12.50", "12.5"}, {"0.000000000000000001", "0.000000000000000001"},
		{strings.Repeat("9", MaxIntDigits) + "." + strings.Repeat("9", MaxScale), strings.Repeat("9", MaxIntDigits) + "." + strings.Repeat("9", MaxScale)},
	}
	for _, c := range good {
		d, err := ParseDecimal(c.in)
		if err != nil {
			t.Errorf("ParseDecimal(%q): %v", c.in, err)
			continue
		}
		if d.String() != c.want {
			t.Errorf("ParseDecimal(%q) = %s, want %s", c.in, d, c.want)
		}
	}
	bad := []string{
		"", "-1", "+1", "1e3", "1E3", "1.", ".5", "01", "00.5", "NaN", "Inf", "Infinity", "-0", " 1", "1 ", "1,5", "0x10",
		"1.2.3", "１", "1_000", strings.Repeat("1", MaxIntDigits+1), "1." + strings.Repeat("0", MaxScale+1), strings.Repeat("1", 1000),
	}
	for _, in := range bad {
		if d, err := ParseDecimal(in); err == nil || !errors.Is(err, ErrDecimal) {
			t.Errorf("ParseDecimal(%q) = %v, %v; want ErrDecimal", in, d, err)
		}
	}
}

func TestDecimalArithmetic(t *testing.T) {
	a, b := MustDecimal("0.1"), MustDecimal("0.2")
	if got := a.Add(b); got.Cmp(MustDecimal("0.3")) != 0 || got.String() != "0.3" {
		t.Fatalf("0.1+0.2 = %s, want exactly 0.3", got)
	}
	if got := a.Sub(b); !got.IsZero() {
		t.Fatalf("0.1-0.2 = %s, want 0 (never negative)", got)
	}
	if got := MustDecimal("10000").Sub(MustDecimal("9999.99")); got.String() != "0.01" {
		t.Fatalf("10000-9999.99 = %s", got)
	}
	if DecimalFromInt(20).Cmp(MustDecimal("20.000")) != 0 || !DecimalFromInt(-3).IsZero() {
		t.Fatal("DecimalFromInt")
	}
	var z Decimal
	if z.String() != "0" || !z.IsZero() || z.Cmp(MustDecimal("0")) != 0 {
		t.Fatal("the zero Decimal is not 0")
	}
	b1, err := json.Marshal(MustDecimal("12.34"))
	if err != nil || string(b1) != `"12.34"` {
		t.Fatalf("MarshalJSON = %s, %v", b1, err)
	}
	var back Decimal
	if err := json.Unmarshal(b1, &back); err != nil || back.String() != "12.34" {
		t.Fatalf("UnmarshalJSON = %s, %v", back, err)
	}
	for _, in := range []string{`12.34`, `"1e2"`, `null`, `"-1"`} {
		if err := json.Unmarshal([]byte(in), &back); err == nil {
			t.Errorf("UnmarshalJSON(%s) accepted", in)
		}
	}
}

func TestAmount(t *testing.T) {
	good := []struct{ args, ptr, want string }{
		{`{"amount":12}`, "/amount", "12"},
		{`{"amount":12.10}`, "/amount", "12.1"},
		{`{"amount":"10000.00"}`, "/amount", "10000"},
		{`{"amount":0.1}`, "/amount", "0.1"},
		{`{"amount":12345678901234567.89}`, "/amount", "12345678901234567.89"},
		{`{"p":{"a/b":[1,{"x~y":"3.5"}]}}`, "/p/a~1b/1/x~0y", "3.5"},
	}
	for _, c := range good {
		d, err := Amount([]byte(c.args), c.ptr)
		if err != nil || d.String() != c.want {
			t.Errorf("Amount(%s, %s) = %s, %v; want %s", c.args, c.ptr, d, err, c.want)
		}
	}
	bad := []struct{ args, ptr string }{
		{`{"amount":-1}`, "/amount"},
		{`{"amount":-0}`, "/amount"},
		{`{"amount":1e3}`, "/amount"},
		{`{"amount":1E-2}`, "/amount"},
		{`{"amount":"1e3"}`, "/amount"},
		{`{"amount":" 5"}`, "/amount"},
		{`{"amount":"NaN"}`, "/amount"},
		{`{"amount":true}`, "/amount"},
		{`{"amount":null}`, "/amount"},
		{`{"amount":{}}`, "/amount"},
		{`{"amount":[1]}`, "/amount"},
		{`{"other":1}`, "/amount"},
		{`{"amount":1,"amount":999999}`, "/amount"}, // duplicate names: the digest and the budget must read one value
		{`{"amount":1}`, ""},
		{`{"amount":1}`, "amount"},
		{`{"amount":1}`, "/am~2ount"},
		{`{"a":[1,2]}`, "/a/01"},
		{`{"a":[1,2]}`, "/a/2"},
		{`{"a":[1,2]}`, "/a/-"},
		{`[1]`, "/0"},
		{`"x"`, "/x"},
		{`{"amount":1`, "/amount"},
		{`{"amount":1} {}`, "/amount"},
		{``, "/amount"},
		{`{"amount":` + strings.Repeat("9", 40) + `}`, "/amount"},
		{`{"amount":1.` + strings.Repeat("1", 19) + `}`, "/amount"},
		{`{"amount":"\u0031"}`, "/x"},
	}
	for _, c := range bad {
		if d, err := Amount([]byte(c.args), c.ptr); err == nil || !errors.Is(err, ErrAmount) {
			t.Errorf("Amount(%s, %q) = %s, %v; want ErrAmount", c.args, c.ptr, d, err)
		}
	}
}

// FuzzParseDecimal: any text is refused or parsed to a value whose String parses back to the
// same value, and no parse panics.
func FuzzParseDecimal(f *testing.F) {
	for _, s := range []string{"0", "1.5", "10000.00", "-1", "1e3", "01", ".5", "NaN", strings.Repeat("9", 31)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDecimal(s)
		if err != nil {
			return
		}
		back, err := ParseDecimal(d.String())
		if err != nil || back.Cmp(d) != 0 {
			t.Fatalf("%q parsed to %s, which reads back as %v, %v", s, d, back, err)
		}
		if strings.ContainsAny(s, "eE-+ ") {
			t.Fatalf("%q accepted", s)
		}
	})
}

// FuzzAmount: any arguments and pointer give an amount or ErrAmount, never a panic; an amount
// read is never negative and reads back.
func FuzzAmount(f *testing.F) {
	f.Add([]byte(`{"amount":12.5}`), "/amount")
	f.Add([]byte(`{"amount":"10000.00"}`), "/amount")
	f.Add([]byte(`{"a":[{"b":1}]}`), "/a/0/b")
	f.Add([]byte(`{"amount":-1e9}`), "/amount")
	f.Fuzz(func(t *testing.T, args []byte, ptr string) {
		d, err := Amount(args, ptr)
		if err != nil {
			if !errors.Is(err, ErrAmount) {
				t.Fatalf("error %v does not wrap ErrAmount", err)
			}
			return
		}
		if back, err := ParseDecimal(d.String()); err != nil || back.Cmp(d) != 0 {
			t.Fatalf("amount %s does not read back: %v", d, err)
		}
	})
}
