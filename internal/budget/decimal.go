package budget

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// Bounds of a decimal: digits before the point and after it. An amount outside them is
// refused, never rounded: money is exact or it is not accepted.
const (
	MaxIntDigits  = 30
	MaxScale      = 18
	maxDecimalLen = MaxIntDigits + 1 + MaxScale
)

// ErrDecimal marks text that is not a decimal this package accepts.
var ErrDecimal = errors.New("budget: not a plain decimal")

// scaleUnit is 10^MaxScale: a Decimal is an integer count of 10^-MaxScale.
var scaleUnit = new(big.Int).Exp(big.NewInt(10), big.NewInt(MaxScale), nil)

// Decimal is an exact non-negative decimal number with at most MaxScale fraction digits. The
// zero value is 0. It never passes through a float.
type Decimal struct {
	// u is the value in units of 10^-MaxScale; nil means 0.
	u *big.Int
}

// ParseDecimal reads a plain decimal: one or more digits, optionally a point and one or more
// digits; no sign, no exponent, no leading zero before another digit, no spaces, NaN or
// Infinity, at most MaxIntDigits before the point and MaxScale after it.
func ParseDecimal(s string) (Decimal, error) {
	if len(s) == 0 {
		return Decimal{}, fmt.Errorf("%w: empty", ErrDecimal)
	}
	if len(s) > maxDecimalLen {
		return Decimal{}, fmt.Errorf("%w: %d bytes; the bound is %d", ErrDecimal, len(s), maxDecimalLen)
	}
	ip, fp, hasPoint := strings.Cut(s, ".")
	if !digits(ip) {
		return Decimal{}, fmt.Errorf("%w: %q (digits, an optional point and digits; no sign or exponent)", ErrDecimal, s)
	}
	if hasPoint && !digits(fp) {
		return Decimal{}, fmt.Errorf("%w: %q (digits must follow the point)", ErrDecimal, s)
	}
	if len(ip) > 1 && ip[0] == '0' {
		return Decimal{}, fmt.Errorf("%w: %q has a leading zero", ErrDecimal, s)
	}
	if len(ip) > MaxIntDigits {
		return Decimal{}, fmt.Errorf("%w: %d digits before the point; the bound is %d", ErrDecimal, len(ip), MaxIntDigits)
	}
	if len(fp) > MaxScale {
		return Decimal{}, fmt.Errorf("%w: %d digits after the point; the bound is %d", ErrDecimal, len(fp), MaxScale)
	}
	u, ok := new(big.Int).SetString(ip+fp+strings.Repeat("0", MaxScale-len(fp)), 10)
	if !ok {
		return Decimal{}, fmt.Errorf("%w: %q", ErrDecimal, s)
	}
	return Decimal{u: u}, nil
}

// MustDecimal is ParseDecimal for constants in tests and defaults; it panics on bad input.
func MustDecimal(s string) Decimal {
	d, err := ParseDecimal(s)
	if err != nil {
		panic(err)
	}
	return d
}

// DecimalFromInt returns n as a Decimal; n must not be negative.
func DecimalFromInt(n int64) Decimal {
	if n <= 0 {
		return Decimal{}
	}
	return Decimal{u: new(big.Int).Mul(big.NewInt(n), scaleUnit)}
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func (d Decimal) big() *big.Int {
	if d.u == nil {
		return new(big.Int)
	}
	return d.u
}

// Add returns d+e.
func (d Decimal) Add(e Decimal) Decimal {
	return Decimal{u: new(big.Int).Add(d.big(), e.big())}
}

// Sub returns d-e, or 0 when e > d: a Decimal is never negative.
func (d Decimal) Sub(e Decimal) Decimal {
	r := new(big.Int).Sub(d.big(), e.big())
	if r.Sign() < 0 {
		return Decimal{}
	}
	return Decimal{u: r}
}

// Cmp compares d and e: -1, 0 or +1.
func (d Decimal) Cmp(e Decimal) int { return d.big().Cmp(e.big()) }

// IsZero reports whether d is 0.
func (d Decimal) IsZero() bool { return d.u == nil || d.u.Sign() == 0 }

// String is the shortest plain decimal of d: no exponent, no trailing fraction zeros ("0",
// "12.5", "10000").
func (d Decimal) String() string {
	s := d.big().String()
	if len(s) <= MaxScale {
		s = strings.Repeat("0", MaxScale-len(s)+1) + s
	}
	ip, fp := s[:len(s)-MaxScale], strings.TrimRight(s[len(s)-MaxScale:], "0")
	if fp == "" {
		return ip
	}
	return ip + "." + fp
}

// MarshalText writes String.
func (d Decimal) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads ParseDecimal's form.
func (d *Decimal) UnmarshalText(b []byte) error {
	v, err := ParseDecimal(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// MarshalBinary writes String's bytes (encoding/gob, between a store's processes).
func (d Decimal) MarshalBinary() ([]byte, error) { return d.MarshalText() }

// UnmarshalBinary reads MarshalBinary's form.
func (d *Decimal) UnmarshalBinary(b []byte) error { return d.UnmarshalText(b) }

// MarshalJSON writes the decimal as a JSON string, so no reader takes it for a float.
func (d Decimal) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a JSON string in ParseDecimal's form.
func (d *Decimal) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("%w: not a JSON string", ErrDecimal)
	}
	return d.UnmarshalText([]byte(s))
}
