package notify

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseHeaders(t *testing.T) {
	cases := []struct {
		name, in string
		want     map[string]string
		bad      bool
	}{
		{name: "bearer", in: "Authorization: Bearer abc\n", want: map[string]string{"Authorization": "Bearer abc"}},
		{name: "comments and blanks", in: "# token\n\nx-api-key:  k1  \r\n", want: map[string]string{"X-Api-Key": "k1"}},
		{name: "value with colon", in: "X-Sig: a:b:c", want: map[string]string{"X-Sig": "a:b:c"}},
		{name: "empty file", in: "", want: map[string]string{}},
		{name: "no colon", in: "Authorization Bearer abc", bad: true},
		{name: "empty name", in: ": v", bad: true},
		{name: "space in name", in: "X Y: v", bad: true},
		{name: "non-ASCII name", in: "Clé: v", bad: true},
		{name: "NUL in value", in: "X: a\x00b", bad: true},
		{name: "Host is the notifier's", in: "Host: evil.example", bad: true},
		{name: "Content-Type is the notifier's", in: "content-type: text/plain", bad: true},
		{name: "too large", in: "X: " + strings.Repeat("a", MaxHeaderFileBytes), bad: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, err := ParseHeaders([]byte(c.in))
			if c.bad {
				if !errors.Is(err, ErrHeaders) {
					t.Fatalf("err %v, want ErrHeaders", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(h) != len(c.want) {
				t.Fatalf("headers %v, want %v", h, c.want)
			}
			for k, v := range c.want {
				if h.Get(k) != v {
					t.Errorf("%s = %q, want %q", k, h.Get(k), v)
				}
			}
		})
	}
}

// FuzzParseHeaders: a headers file is operator input read on every delivery; bad bytes give
// ErrHeaders, never a panic, and an error never echoes a value.
func FuzzParseHeaders(f *testing.F) {
	for _, s := range []string{"Authorization: Bearer x\n", "# c\n\nA: b\r\nC: d", ":", "A:", "A B: c", "Host: x", "X: \x00", "\xff\xfe: v"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := ParseHeaders(data)
		if err != nil {
			if !errors.Is(err, ErrHeaders) {
				t.Fatalf("error without ErrHeaders: %v", err)
			}
			return
		}
		for k, vs := range h {
			if !validHeaderName(k) {
				t.Fatalf("accepted header name %q", k)
			}
			for _, v := range vs {
				if strings.ContainsAny(v, "\r\n\x00") {
					t.Fatalf("accepted value with a line break: %q", v)
				}
			}
		}
	})
}

func TestValidateURL(t *testing.T) {
	cases := []struct {
		url string
		ok  bool
	}{
		{"https://hooks.slack.com/services/T0/B0/xyz", true},
		{"http://127.0.0.1:9000/hook", true},
		{"http://[::1]:9000/hook", true},
		{"http://localhost:9000/hook", true},
		{"http://hooks.example/hook", false},
		{"http://10.0.0.1/hook", false},
		{"ftp://hooks.example/hook", false},
		{"https:///hook", false},
		{"https://user:pass@hooks.example/hook", false},
		{"https://hooks.example/hook#frag", false},
		{"hooks.example/hook", false},
		{"://", false},
	}
	for _, c := range cases {
		err := ValidateURL(c.url)
		if (err == nil) != c.ok {
			t.Errorf("ValidateURL(%q) = %v, want ok=%v", c.url, err, c.ok)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	n := &Notifier{opts: Options{MaxRetryAfter: 30 * time.Second, Now: func() time.Time { return t0 }}}
	cases := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"5", 5 * time.Second},
		{"0", 0},
		{"-3", 0},
		{"31", 30 * time.Second},
		{"99999999999999999999", 0}, // unparsable as int64 or date: the backoff applies
		{t0.Add(10 * time.Second).Format("Mon, 02 Jan 2006 15:04:05 GMT"), 10 * time.Second},
		{t0.Add(-time.Hour).Format("Mon, 02 Jan 2006 15:04:05 GMT"), 0},
		{t0.Add(time.Hour).Format("Mon, 02 Jan 2006 15:04:05 GMT"), 30 * time.Second},
		{"tomorrow", 0},
	}
	for _, c := range cases {
		if got := n.retryAfter(c.in); got != c.want {
			t.Errorf("retryAfter(%q) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestBackoffAndJitter(t *testing.T) {
	n := &Notifier{opts: Options{BaseBackoff: time.Second, MaxBackoff: 10 * time.Second}}
	want := []time.Duration{1, 2, 4, 8, 10, 10}
	for i, w := range want {
		if got := n.backoff(i + 1); got != w*time.Second {
			t.Errorf("backoff(%d) = %v, want %v", i+1, got, w*time.Second)
		}
	}
	for range 1000 {
		if j := equalJitter(4 * time.Second); j < 2*time.Second || j >= 4*time.Second {
			t.Fatalf("jitter %v outside [2s, 4s)", j)
		}
	}
}
