package diag

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestLimiterBoundsEachKey: a key is allowed once per period, others independently; a
// forgotten key is allowed at once; the keys remembered stay bounded.
func TestLimiterBoundsEachKey(t *testing.T) {
	l := NewLimiter(30 * time.Second)
	t0 := time.Unix(1_800_000_000, 0)
	allowed := 0
	for i := range 120 { // one check a second for two minutes
		if l.Allow("AuthorityUnreachable/authority", t0.Add(time.Duration(i)*time.Second)) {
			allowed++
		}
	}
	if allowed != 4 {
		t.Fatalf("allowed %d times in 120 s, want 4 (at 0, 30, 60, 90 s)", allowed)
	}
	if !l.Allow("UpstreamUnreachable/payments", t0.Add(time.Second)) {
		t.Fatal("another key was held back")
	}
	l.Forget("UpstreamUnreachable/payments")
	if !l.Allow("UpstreamUnreachable/payments", t0.Add(2*time.Second)) {
		t.Fatal("a forgotten key was held back")
	}
	for i := range 10 * MaxLimiterKeys {
		l.Allow(fmt.Sprintf("k%d", i), t0.Add(time.Duration(i)*time.Millisecond))
	}
	if n := len(l.last); n > MaxLimiterKeys {
		t.Fatalf("%d keys remembered, bound %d", n, MaxLimiterKeys)
	}
}

// TestParseInitialize: an upstream's answer to initialize, good and bad; bad input is a
// reason, never a panic or an OK.
func TestParseInitialize(t *testing.T) {
	for _, tc := range []struct {
		name, ct, body, reason, detail string
	}{
		{"json result", "application/json", `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","serverInfo":{"name":"pay","version":"1"}}}`,
			"", `MCP server "pay" 1 answers initialize (revision 2025-11-25)`},
		{"event stream", "text/event-stream", "event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"serverInfo\":{\"name\":\"s\"}}}\r\n\r\n",
			"", `MCP server "s"`},
		{"error", "application/json", `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"unsupported"}}`, UpstreamRefused, "-32602 unsupported"},
		{"no result", "application/json", `{"jsonrpc":"2.0","id":1}`, UpstreamRefused, "no result"},
		{"html", "text/html", `<html>login</html>`, UpstreamRefused, "not JSON-RPC"},
		{"empty", "", ``, UpstreamRefused, "not JSON-RPC"},
		{"stream without data", "text/event-stream", "event: x\n\n", UpstreamRefused, "not JSON-RPC"},
		{"result not an object", "application/json", `{"result":7}`, UpstreamRefused, "not JSON-RPC"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reason, detail := parseInitialize(tc.ct, []byte(tc.body))
			if reason != tc.reason || !strings.Contains(detail, tc.detail) {
				t.Fatalf("(%q, %q), want (%q, …%q…)", reason, detail, tc.reason, tc.detail)
			}
		})
	}
}

func FuzzParseInitialize(f *testing.F) {
	f.Add("application/json", []byte(`{"result":{"serverInfo":{"name":"s"}}}`))
	f.Add("text/event-stream", []byte("data: {\"error\":{\"code\":1}}\n"))
	f.Add("text/event-stream; charset=utf-8", []byte("data:"))
	f.Fuzz(func(t *testing.T, ct string, body []byte) {
		reason, _ := parseInitialize(ct, body)
		if reason != "" && Fix[reason] == "" {
			t.Fatalf("reason %q has no fix", reason)
		}
	})
}

// TestTLSFailure: certificate and handshake errors are TLS failures; a refused connection is not.
func TestTLSFailure(t *testing.T) {
	if TLSFailure(nil) || TLSFailure(errors.New("dial tcp: connection refused")) {
		t.Fatal("a non-TLS error counted as a TLS failure")
	}
}

// TestParseProbeOutput: the problems come back from a probe-failure Event's message, from the
// problem lines or the readiness JSON; bad or hostile text yields nothing or clean problems.
func TestParseProbeOutput(t *testing.T) {
	line := FormatProblem(New(UpstreamTLSFailure, "payments", `upstream "payments": TLS with h:443: x509: unknown authority`))
	for _, tc := range []struct {
		name, in string
		want     []string // reason/subject of each problem
	}{
		{"event with lines", "Readiness probe failed: " + line + "\n" + FormatProblem(New(NotYetReceived, "policy", "not yet")), []string{
			"UpstreamTLSFailure/payments", "NotYetReceived/policy"}},
		{"event with JSON", "Startup probe failed: x\n" + `{"ready":false,"problems":[{"reason":"AuthorityUnreachable","subject":"authority","message":"m"}]}`,
			[]string{"AuthorityUnreachable/authority"}},
		{"old sidecar: JSON only", `Readiness probe failed: {"ready":false,"upstreams":{"payments":"unreachable"}}`, nil},
		{"empty", "", nil},
		{"garbage", "\x00\x1b[2J{{{((( ): : Fix:", nil},
		{"no subject", "UpstreamTLSFailure (): x", nil},
		{"control characters", "AuthorityRefused (authority): a\x1b[31mb. Fix: c\x07", []string{"AuthorityRefused/authority"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ParseProbeOutput(tc.in)
			var keys []string
			for _, p := range got {
				keys = append(keys, p.Reason+"/"+p.Subject)
				if Safe(p.Message) != p.Message || Safe(p.Fix) != p.Fix {
					t.Errorf("unsafe text kept: %+v", p)
				}
			}
			if strings.Join(keys, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("problems %v, want %v", keys, tc.want)
			}
		})
	}
	if p := ParseProbeOutput(line); len(p) != 1 || p[0].Fix != Fix[UpstreamTLSFailure] || !strings.Contains(p[0].Message, "x509") {
		t.Fatalf("round trip: %+v", p)
	}
	many := strings.Repeat(line+"\n", 1000)
	if p := ParseProbeOutput(many); len(p) > maxProblems {
		t.Fatalf("%d problems, bound %d", len(p), maxProblems)
	}
}

func FuzzParseProbeOutput(f *testing.F) {
	f.Add("Readiness probe failed: " + FormatProblem(New(UpstreamUnreachable, "p", "m")))
	f.Add(`{"problems":[{"reason":"r","subject":"s"}]}`)
	f.Fuzz(func(t *testing.T, s string) {
		for _, p := range ParseProbeOutput(s) {
			if p.Reason == "" || p.Subject == "" || Safe(p.Message) != p.Message {
				t.Fatalf("bad problem %+v", p)
			}
		}
	})
}
