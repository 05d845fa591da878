package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/hostloop"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/sink"
)

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return v
}

// TestEnforceThenComplete is tool-use-binding §16 over HTTP for the three vendor shapes: allow
// under authority only after the consume and the DISPATCH_PENDING record; the host reports the
// outcome once.
func TestEnforceThenComplete(t *testing.T) {
	for _, tc := range []struct {
		vendor, block string
	}{
		{"anthropic", `{"type":"tool_use","id":"toolu_01A","name":"send_payment","input":{"amount":250,"to":"ACME"}}`},
		{"openai", `{"id":"call_9","type":"function","function":{"name":"send_payment","arguments":"{\"amount\":250,\"to\":\"ACME\"}"}}`},
		{"openai-responses", `{"type":"function_call","id":"fc_1","call_id":"call_8f3","name":"send_payment","arguments":"{\"amount\":250,\"to\":\"ACME\"}","status":"completed"}`},
	} {
		t.Run(tc.vendor, func(t *testing.T) {
			f := newFixture(t)
			status, body := f.post(hostloop.EnforcePath, `{"vendor":"`+tc.vendor+`","block":`+tc.block+`,"session":"conv-1","provenance":"user"}`)
			d := decode[hostloop.Decision](t, body)
			if status != http.StatusOK || !d.Allow || d.AuthorityID == "" || d.OperationID == "" || d.State != journal.StateDispatchPending {
				t.Fatalf("enforce: HTTP %d %+v", status, d)
			}
			if f.stub.consumeCount() != 1 || f.stub.consumes[0].AuthorityID != d.AuthorityID || f.stub.consumes[0].OperationID != d.OperationID {
				t.Fatalf("allow returned without the consume of %s: %+v", d.AuthorityID, f.stub.consumes)
			}
			rec, err := f.store.Record(context.Background(), d.OperationID)
			if err != nil || rec.State != journal.StateDispatchPending {
				t.Fatalf("journal before complete: %+v %v", rec, err)
			}
			status, body = f.post(hostloop.CompletePath, `{"operation_id":"`+d.OperationID+`","outcome":"executed","result":{"paid":true}}`)
			if c := decode[hostloop.CompleteResponse](t, body); status != http.StatusOK || c.State != journal.StateExecuted {
				t.Fatalf("complete: HTTP %d %s", status, body)
			}
			rec, _ = f.store.Record(context.Background(), d.OperationID)
			if rec.State != journal.StateExecuted || string(rec.Result) != `{"paid":true}` || rec.EvidenceDigest != sink.EvidenceDigest([]byte(`{"paid":true}`)) {
				t.Fatalf("journal after complete: %+v", rec)
			}
			// The outcome is reported for the Act with the journal's evidence, never the result.
			if reps := f.waitReports(1); len(reps) != 1 || reps[0].State != "EXECUTED" || reps[0].OperationID != d.OperationID ||
				reps[0].AuthorityID != d.AuthorityID || reps[0].EvidenceDigest != rec.EvidenceDigest {
				t.Fatalf("reports after complete: %+v", reps)
			}
			// Settled once: a second report is refused and changes nothing.
			status, body = f.post(hostloop.CompletePath, `{"operation_id":"`+d.OperationID+`","outcome":"failed"}`)
			if e := decode[hostloop.ErrorResponse](t, body); status != http.StatusConflict || e.Error.Code != hostloop.CodeSettled {
				t.Fatalf("second complete: HTTP %d %s", status, body)
			}
			if rec, _ = f.store.Record(context.Background(), d.OperationID); rec.State != journal.StateExecuted {
				t.Fatalf("settled record moved to %s", rec.State)
			}
			if n := len(f.stub.reported()); n != 1 {
				t.Fatalf("a refused second complete was reported: %d reports", n)
			}
		})
	}
}

// TestEnforceRefusals: a refused block gets allow false, the EF code and the deny in the
// block's vendor shape, and nothing is consumed or journaled.
func TestEnforceRefusals(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name, body string
		code       ef.EFCode
		denyHas    string
	}{
		{"policy deny, anthropic", `{"vendor":"anthropic","block":{"type":"tool_use","id":"toolu_9","name":"email_send","input":{}}}`,
			ef.EFPolicyDenied, `"tool_use_id":"toolu_9","is_error":true`},
		{"escalation, openai", `{"vendor":"openai","block":{"id":"call_7","type":"function","function":{"name":"wire","arguments":"{\"amount\":9000}"}}}`,
			ef.EFEscalationRequired, `"tool_call_id":"call_7"`},
		{"tampered authority, responses", `{"vendor":"openai-responses","block":{"type":"function_call","call_id":"call_3","name":"tamper","arguments":"{}"}}`,
			ef.EFScopeMismatch, `"call_id":"call_3"`},
		{"unknown server", `{"vendor":"anthropic","server":"mail","block":{"type":"tool_use","id":"toolu_1","name":"get_balance","input":{}}}`,
			ef.EFUnknownTool, `"tool_use_id":"toolu_1"`},
		{"block not a tool_use", `{"vendor":"anthropic","block":{"type":"text","text":"hi"}}`, ef.EFActInvalid, ""},
		{"arguments not JSON", `{"vendor":"openai","block":{"id":"call_1","type":"function","function":{"name":"get_balance","arguments":"{"}}}`, ef.EFActInvalid, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := f.stub.consumeCount()
			status, body := f.post(hostloop.EnforcePath, tc.body)
			d := decode[hostloop.Decision](t, body)
			if status != http.StatusOK || d.Allow || d.Code != tc.code || d.AuthorityID != "" || d.OperationID != "" {
				t.Fatalf("HTTP %d %+v, want a refusal with %s", status, d, tc.code)
			}
			if tc.denyHas != "" && !strings.Contains(string(d.Deny), tc.denyHas) {
				t.Fatalf("vendor deny %s lacks %s", d.Deny, tc.denyHas)
			}
			if f.stub.consumeCount() > before && tc.code != ef.EFScopeMismatch {
				t.Fatal("consumed on a refusal")
			}
		})
	}
	if recs, _ := f.store.InState(context.Background(), journal.StateDispatchPending); len(recs) != 0 {
		t.Fatalf("%d DISPATCH_PENDING records after refusals", len(recs))
	}
	// The escalation names its moment and envelope.
	_, body := f.post(hostloop.EnforcePath, `{"vendor":"anthropic","block":{"type":"tool_use","id":"toolu_2","name":"wire","input":{"amount":1}}}`)
	d := decode[hostloop.Decision](t, body)
	if len(d.BindingMoments) != 1 || d.BindingMoments[0] != moment || d.EnvelopeDigest != f.stub.env.Digest() || len(d.BindingMoment) == 0 {
		t.Fatalf("escalation decision %+v", d)
	}
	// The text the host relays to the principal names the command for a pod.
	if want := "kubectl actgate resolve " + moment + " -n " + testNS; !strings.Contains(d.Message, want) {
		t.Fatalf("escalation message %q lacks %q", d.Message, want)
	}
}

// TestEnforceHotPath: an allow without authority has nothing to consume or report.
func TestEnforceHotPath(t *testing.T) {
	f := newFixture(t)
	_, body := f.post(hostloop.EnforcePath, `{"vendor":"anthropic","block":{"type":"tool_use","id":"toolu_1","name":"get_balance","input":{}}}`)
	d := decode[hostloop.Decision](t, body)
	if !d.Allow || d.AuthorityID != "" || d.OperationID != "" || f.stub.consumeCount() != 0 {
		t.Fatalf("hot path %+v, %d consumes", d, f.stub.consumeCount())
	}
}

func TestCompleteErrors(t *testing.T) {
	f := newFixture(t)
	status, body := f.post(hostloop.CompletePath, `{"operation_id":"op-never-issued","outcome":"executed"}`)
	if e := decode[hostloop.ErrorResponse](t, body); status != http.StatusNotFound || e.Error.Code != hostloop.CodeUnknownOperation {
		t.Fatalf("unknown operation: HTTP %d %s", status, body)
	}
	// Indeterminate stays INDETERMINATE and is then settled (a later report cannot overwrite it).
	_, body = f.post(hostloop.EnforcePath, `{"vendor":"anthropic","block":{"type":"tool_use","id":"toolu_1","name":"send_payment","input":{"amount":1}}}`)
	d := decode[hostloop.Decision](t, body)
	if status, body := f.post(hostloop.CompletePath, `{"operation_id":"`+d.OperationID+`","outcome":"indeterminate"}`); status != 200 || !strings.Contains(string(body), "INDETERMINATE") {
		t.Fatalf("indeterminate: HTTP %d %s", status, body)
	}
	if status, _ := f.post(hostloop.CompletePath, `{"operation_id":"`+d.OperationID+`","outcome":"executed"}`); status != http.StatusConflict {
		t.Fatalf("executed after indeterminate: HTTP %d, want 409 (only reconciliation settles it)", status)
	}
	if _, err := f.gate.HostLoop().Complete(context.Background(), testAgent, d.OperationID, hostloop.HostExecuted, nil); !errors.Is(err, hostloop.ErrSettled) {
		t.Fatalf("Complete: %v", err)
	}
}

// TestHostLoopBadRequests: malformed requests are refused with a stable code, never an allow,
// and never reach the service.
func TestHostLoopBadRequests(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name, path, ctype, body string
		status                  int
	}{
		{"not JSON", hostloop.EnforcePath, "application/json", `{`, 400},
		{"unknown member", hostloop.EnforcePath, "application/json", `{"vendor":"anthropic","block":{},"allow":true}`, 400},
		{"duplicate member", hostloop.EnforcePath, "application/json", `{"vendor":"anthropic","vendor":"openai","block":{}}`, 400},
		{"member case", hostloop.EnforcePath, "application/json", `{"Vendor":"anthropic","block":{}}`, 400},
		{"no vendor", hostloop.EnforcePath, "application/json", `{"block":{}}`, 400},
		{"unknown vendor", hostloop.EnforcePath, "application/json", `{"vendor":"gemini","block":{}}`, 400},
		{"no block", hostloop.EnforcePath, "application/json", `{"vendor":"anthropic"}`, 400},
		{"null block", hostloop.EnforcePath, "application/json", `{"vendor":"anthropic","block":null}`, 400},
		{"bad server", hostloop.EnforcePath, "application/json", `{"vendor":"anthropic","block":{},"server":"Pay ments"}`, 400},
		{"bad provenance", hostloop.EnforcePath, "application/json", `{"vendor":"anthropic","block":{},"provenance":"admin"}`, 400},
		{"control char in session", hostloop.EnforcePath, "application/json", `{"vendor":"anthropic","block":{},"session":"a\u0000b"}`, 400},
		{"wrong type", hostloop.EnforcePath, "application/json", `{"vendor":1,"block":{}}`, 400},
		{"trailing data", hostloop.EnforcePath, "application/json", `{"vendor":"anthropic","block":{}} {}`, 400},
		{"not JSON media type", hostloop.EnforcePath, "text/plain", `{"vendor":"anthropic","block":{}}`, 415},
		{"complete without operation", hostloop.CompletePath, "application/json", `{"outcome":"executed"}`, 400},
		{"complete bad outcome", hostloop.CompletePath, "application/json", `{"operation_id":"op","outcome":"done"}`, 400},
		{"complete unknown member", hostloop.CompletePath, "application/json", `{"operation_id":"op","outcome":"executed","state":"EXECUTED"}`, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Post(f.srv.URL+tc.path, tc.ctype, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e hostloop.ErrorResponse
			if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || resp.StatusCode != tc.status || e.Error.Code != hostloop.CodeBadRequest {
				t.Fatalf("HTTP %d code %q (%v), want %d %s", resp.StatusCode, e.Error.Code, err, tc.status, hostloop.CodeBadRequest)
			}
		})
	}
	resp, err := http.Get(f.srv.URL + hostloop.EnforcePath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET: HTTP %d", resp.StatusCode)
	}
	if f.stub.reviewCount() != 0 {
		t.Fatal("a malformed request reached the service")
	}
}

// TestHostLoopRefusesRebinding: the sidecar's host-loop endpoint needs no token, so a page of
// another site that a DNS rebinding points at the loopback listener is refused on its Host or
// Origin (403 HOSTLOOP_HOST_REFUSED) before anything is read, and nothing reaches the service.
func TestHostLoopRefusesRebinding(t *testing.T) {
	f := newFixture(t)
	body := `{"vendor":"anthropic","block":{"type":"tool_use","id":"toolu_1","name":"send_payment","input":{"amount":1}}}`
	for _, tc := range []struct{ name, host, origin string }{
		{"foreign Origin", "", "http://evil.example"},
		{"null Origin", "", "null"},
		{"foreign Host", "evil.example", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, f.srv.URL+hostloop.EnforcePath, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			if tc.host != "" {
				req.Host = tc.host
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e hostloop.ErrorResponse
			if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || resp.StatusCode != http.StatusForbidden || e.Error.Code != hostloop.CodeHostRefused {
				t.Fatalf("HTTP %d %q %v", resp.StatusCode, e.Error.Code, err)
			}
		})
	}
	// A loopback Origin (a local tool's page) is admitted.
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+hostloop.EnforcePath, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", "http://127.0.0.1:3000")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("loopback Origin: HTTP %d", resp.StatusCode)
	}
	if f.stub.reviewCount() != 1 {
		t.Fatalf("%d reviews, want only the loopback one's", f.stub.reviewCount())
	}
}

// TestHostLoopDestination: the sidecar's host-loop endpoint decides the host's live destination
// with the same code as serve (internal/hostloop, the sink's policy): the server's own URL is
// allowed, a swapped MCP server URL (another host, or another path at the same origin) is
// EF_DESTINATION_MISMATCH before anything is consumed (tool-use-binding §22 T-D).
func TestHostLoopDestination(t *testing.T) {
	f := newFixture(t)
	enforce := func(tool, dest string) hostloop.Decision {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"vendor": "anthropic", "session": "conv-d", "provenance": "user", "destination": dest,
			"block": map[string]any{"type": "tool_use", "id": "toolu_d", "name": tool, "input": map[string]any{"amount": 5, "to": "ACME"}}})
		status, body := f.post(hostloop.EnforcePath, string(b))
		if status != http.StatusOK {
			t.Fatalf("HTTP %d %s", status, body)
		}
		return decode[hostloop.Decision](t, body)
	}
	if d := enforce("get_balance", f.up.URL); !d.Allow {
		t.Fatalf("at the server's own URL: %+v", d)
	}
	for _, dest := range []string{"https://payments.attacker.example/mcp", strings.TrimSuffix(f.up.URL, "/") + "-mirror"} {
		for _, tool := range []string{"get_balance", "send_payment"} {
			if d := enforce(tool, dest); d.Allow || d.Code != ef.EFDestinationMismatch || d.OperationID != "" {
				t.Fatalf("%s at %s: %+v", tool, dest, d)
			}
		}
	}
	if n := f.stub.consumeCount(); n != 0 {
		t.Fatalf("%d consumes for refused destinations", n)
	}
}
