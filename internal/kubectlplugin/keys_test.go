package kubectlplugin

import (
	"bytes"
	"reflect"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/actgate/actgate/internal/envelope"
)

func TestDecodeKeys(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want []key
		rest string
	}{
		{"empty", "", nil, ""},
		{"letters", "aqd", []key{r('a'), r('q'), r('d')}, ""},
		{"arrows (CSI)", "\x1b[A\x1b[B", []key{up, down}, ""},
		{"arrows (SS3, application cursor mode)", "\x1bOA\x1bOB", []key{up, down}, ""},
		{"left and right are other keys", "\x1b[C\x1b[D", []key{other, other}, ""},
		{"a lone Esc", "\x1b", []key{esc}, ""},
		{"Esc then a letter (Alt-x) is Esc and the letter", "\x1bx", []key{esc, r('x')}, ""},
		{"Esc Esc", "\x1b\x1b", []key{esc, esc}, ""},
		{"CR is Enter", "\r", []key{enter}, ""},
		{"LF is Enter", "\n", []key{enter}, ""},
		{"CR LF is one Enter", "\r\n", []key{enter}, ""},
		{"LF CR is two", "\n\r", []key{enter, enter}, ""},
		{"DEL and BS are backspace", "\x7f\x08", []key{backspace, backspace}, ""},
		{"Ctrl-C and Ctrl-D interrupt", "\x03\x04", []key{interrupt, interrupt}, ""},
		{"other controls are other keys", "\x00\x07\x1f", []key{other, other, other}, ""},
		{"a CSI sequence with parameters (Ctrl-↑) is one other key", "\x1b[1;5Aq", []key{other, r('q')}, ""},
		{"function key F5", "\x1b[15~d", []key{other, r('d')}, ""},
		{"a CSI cut off by the read", "\x1b[1;", []key{other}, ""},
		{"an SS3 cut off by the read", "\x1bO", []key{other}, ""},
		{"UTF-8 runes", "ü€😀", []key{r('ü'), r('€'), r('😀')}, ""},
		{"an incomplete rune is carried", "a\xe2\x82", []key{r('a')}, "\xe2\x82"},
		{"invalid UTF-8 is other", "\xff\xfeq", []key{other, other, r('q')}, ""},
		{"C1 controls are other", "\u009b" + "2J", []key{other, r('2'), r('J')}, ""},
		{"a pasted answer", "Pay later\r", append(typed("Pay later"), enter), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, rest := decodeKeys([]byte(tc.in))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("keys %v, want %v", got, tc.want)
			}
			if string(rest) != tc.rest {
				t.Errorf("rest %q, want %q", rest, tc.rest)
			}
		})
	}
}

// TestDecodeKeysCarry: a rune split across two reads decodes once the rest arrives.
func TestDecodeKeysCarry(t *testing.T) {
	whole := []byte("€")
	keys, rest := decodeKeys(whole[:1])
	if len(keys) != 0 || !bytes.Equal(rest, whole[:1]) {
		t.Fatalf("first half: keys %v rest %q", keys, rest)
	}
	keys, rest = decodeKeys(append(rest, whole[1:]...))
	if len(keys) != 1 || keys[0] != r('€') || len(rest) != 0 {
		t.Fatalf("second half: keys %v rest %q", keys, rest)
	}
}

// FuzzDecodeKeys: any bytes decode without panicking; a rune key is never a control, line
// break or bidi character (so nothing but printable text reaches an answer); the rest is a
// proper prefix of one UTF-8 sequence; and the picker survives every decoded key.
func FuzzDecodeKeys(f *testing.F) {
	for _, s := range []string{"", "a", "\x1b", "\x1b[A", "\x1bOB", "\x1b[1;5A", "\r\n", "\xe2\x82", "\xff", "\u009b", "\u202e", "q\x03", "a hello\ry"} {
		f.Add([]byte(s))
	}
	env := envelopeOfFuzz(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		keys, rest := decodeKeys(b)
		for _, k := range keys {
			if k.kind == keyRune && (unsafeRune(k.r) || !utf8.ValidRune(k.r) || k.r == utf8.RuneError) {
				t.Fatalf("rune key %U from %q", k.r, b)
			}
		}
		if len(rest) >= utf8.UTFMax || len(rest) > 0 && utf8.FullRune(rest) {
			t.Fatalf("rest %q is not an incomplete rune", rest)
		}
		p := newPicker(env)
		for _, k := range keys {
			if done, res := p.Key(k); done {
				if res != nil {
					if _, err := SpecResolution(env, *res); err != nil {
						t.Fatalf("the picker returned an invalid resolution: %v", err)
					}
				}
				break
			}
		}
		for _, c := range p.answer {
			if !unicode.IsPrint(c) && c != ' ' {
				t.Fatalf("answer holds %U", c)
			}
		}
		_ = p.View()
	})
}

func envelopeOfFuzz(f *testing.F) *envelope.Envelope {
	objs := loadObjects(f, "testdata/show/pending.yaml")
	m := OpenMoment(&objs.moments[0])
	if !m.Well() {
		f.Fatal("pending.yaml's envelope is discarded")
	}
	return m.Envelope
}
