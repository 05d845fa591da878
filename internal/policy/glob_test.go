package policy

import (
	"strings"
	"testing"
)

func TestGlob(t *testing.T) {
	for _, tc := range []struct {
		pattern, name string
		want          bool
	}{
		{"*", "", true},
		{"*", "anything/at:all", true},
		{"**", "x", true},
		{"get_*", "get_balance", true},
		{"get_*", "get_", true},
		{"get_*", "get", false},
		{"get_*", "Get_balance", false}, // case matters
		{"get_*", "xget_balance", false},
		{"search*", "search", true},
		{"*_send", "email_send", true},
		{"*_send", "email_send_later", false},
		{"github/*", "github/create_issue", true}, // '*' crosses '/', unlike path.Match
		{"github/*", "github/a/b", true},
		{"*/delete", "github/repo/delete", true},
		{"a*b*c", "abc", true},
		{"a*b*c", "aXbYbZc", true},
		{"a*b*c", "aXbYcZ", false},
		{"?", "a", true},
		{"?", "é", true}, // one rune, two bytes
		{"?", "", false},
		{"?", "ab", false},
		{"??", "é", false},
		{"get_?", "get_x", true},
		{"get_?", "get_xy", false},
		{"*a", strings.Repeat("a", 1000) + "b", false},
		{"*a*a*a*a*b", strings.Repeat("a", 500), false},
		{"refund", "refund", true},
		{"refund", "refunds", false},
		{"x*", "x\xff", true}, // invalid UTF-8 in a name is just bytes
		{"x?", "x\xff", true},
	} {
		g, err := compileGlob(tc.pattern)
		if err != nil {
			t.Fatalf("%q: %v", tc.pattern, err)
		}
		if got := g.match(tc.name); got != tc.want {
			t.Errorf("%q match %q = %v, want %v", tc.pattern, tc.name, got, tc.want)
		}
	}
}

func TestGlobInvalid(t *testing.T) {
	for _, p := range []string{"", "get_[a-z]", `get\*`, "get balance", "gét", "a{b,c}", strings.Repeat("a", 129), "x\x00"} {
		if _, err := compileGlob(p); err == nil {
			t.Errorf("%q compiled", p)
		}
	}
}

func TestOrigin(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://payments.example/mcp", "https://payments.example"},
		{"https://payments.example:443/mcp", "https://payments.example"},
		{"http://payments.example:80", "http://payments.example"},
		{"http://payments.example:443", "http://payments.example:443"},
		{"HTTPS://PAY.Example:8443/x?y#z", "https://pay.example:8443"},
		{"https://user:pw@pay.example/x", "https://pay.example"},
		{"https://pay.example@evil.example/x", "https://evil.example"},
		{"http://[::1]:9222/", "http://[::1]:9222"},
		{"mcp://git.example/prod", "mcp://git.example"},
	} {
		got, err := origin(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("origin(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "/mcp", "payments", "https://", "https://:443", "mailto:a@b", "https://a b", "://x", strings.Repeat("h", 3000)} {
		if got, err := origin(bad); err == nil {
			t.Errorf("origin(%q) = %q, want an error", bad, got)
		}
	}
	if _, err := httpOrigin("mcp://git.example"); err == nil {
		t.Error("httpOrigin accepted mcp://")
	}
}
