package actgate_test

// Fail-closed: without a decision from the gate the tool never runs — the gate unreachable, the
// gate silent past the client's timeout, an answer the client cannot read, an answer that
// contradicts itself, an escalation nobody resolves before the host gives up.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	actgate "github.com/actgate/actgate/sdk/go"
)

// countedTools is a host tool that counts its own invocations.
func countedTools(n *atomic.Int32) actgate.Tools {
	return actgate.Tools{"get_balance": func(context.Context, actgate.Call) (string, error) {
		n.Add(1)
		return `{"balance":1000}`, nil
	}}
}

var balanceUse = anthropic.ToolUseBlock{ID: "toolu_fc", Name: "get_balance", Input: json.RawMessage(`{"account":"main"}`)}

func TestUnreachableGateNeverRunsTool(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now
	var n atomic.Int32
	gc := &actgate.Client{BaseURL: "http://" + addr}
	block, cr := gc.RunAnthropicToolUse(testCtx(t), balanceUse, countedTools(&n), actgate.RunOptions{})
	if cr.Err == nil || cr.Ran || n.Load() != 0 {
		t.Fatalf("ran %v (count %d), err %v", cr.Ran, n.Load(), cr.Err)
	}
	if block.OfToolResult == nil || !block.OfToolResult.IsError.Value {
		t.Errorf("tool_result for the model: %+v", block)
	}
	e := parseError(t, cr.Text)
	if e.Error.Code != actgate.ErrCodeUnavailable {
		t.Errorf("code %s", e.Error.Code)
	}
}

func TestGateTimeoutNeverRunsTool(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { <-stop; _ = c.Close() }() // reads nothing, answers nothing
		}
	}()
	var n atomic.Int32
	gc := &actgate.Client{BaseURL: "http://" + ln.Addr().String(), HTTPClient: &http.Client{Timeout: 300 * time.Millisecond}}
	_, cr := gc.RunAnthropicToolUse(testCtx(t), balanceUse, countedTools(&n), actgate.RunOptions{})
	if cr.Err == nil || cr.Ran || n.Load() != 0 {
		t.Fatalf("ran %v (count %d), err %v", cr.Ran, n.Load(), cr.Err)
	}
	// The host's own deadline is the same: no decision, nothing run.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	gc.HTTPClient = nil
	_, cr = gc.RunAnthropicToolUse(ctx, balanceUse, countedTools(&n), actgate.RunOptions{})
	if !errors.Is(cr.Err, context.DeadlineExceeded) || cr.Ran || n.Load() != 0 {
		t.Fatalf("ran %v (count %d), err %v", cr.Ran, n.Load(), cr.Err)
	}
}

// TestBadAnswersNeverRunTool: a loopback server answers the wrapper's enforce in ways no gate
// should; each is an error with its HOSTLOOP_* code and the tool does not run.
func TestBadAnswersNeverRunTool(t *testing.T) {
	cases := []struct {
		name, ctype, body string
		status            int
		code              string
	}{
		{"not JSON", "application/json", `allow`, 200, actgate.ErrCodeBadAnswer},
		{"truncated", "application/json", `{"allow":tr`, 200, actgate.ErrCodeBadAnswer},
		{"allow with a refusal code", "application/json", `{"allow":true,"code":"EF_002"}`, 200, actgate.ErrCodeBadAnswer},
		{"allow and replayed", "application/json", `{"allow":true,"replayed":true}`, 200, actgate.ErrCodeBadAnswer},
		{"allow as a string", "application/json", `{"allow":"true"}`, 200, actgate.ErrCodeBadAnswer},
		{"too large", "application/json", `{"message":"` + strings.Repeat("x", 9<<20) + `"}`, 200, actgate.ErrCodeBadAnswer},
		{"401 without body", "text/plain", `unauthorized`, 401, actgate.ErrCodeUnauthenticated},
		{"401 HOSTLOOP", "application/json", `{"error":{"code":"HOSTLOOP_UNAUTHENTICATED","message":"no token"}}`, 401, actgate.ErrCodeUnauthenticated},
		{"429 pending limit", "application/json", `{"error":{"code":"HOSTLOOP_PENDING_LIMIT","message":"too many"}}`, 429, actgate.ErrCodePendingLimit},
		{"400 bad request", "application/json", `{"error":{"code":"HOSTLOOP_BAD_REQUEST","message":"vendor"}}`, 400, actgate.ErrCodeBadRequest},
		{"502 html", "text/html", `<html>bad gateway</html>`, 502, actgate.ErrCodeUnavailable},
		{"200 allow with wrong code prefix error", "application/json", `{"error":{"code":"OTHER","message":"x"}}`, 500, actgate.ErrCodeBadAnswer},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", tc.ctype)
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			})}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go func() { _ = srv.Serve(ln) }()
			t.Cleanup(func() { _ = srv.Close() })
			var n atomic.Int32
			gc := &actgate.Client{BaseURL: "http://" + ln.Addr().String()}
			_, cr := gc.RunAnthropicToolUse(testCtx(t), balanceUse, countedTools(&n), actgate.RunOptions{})
			if cr.Ran || n.Load() != 0 || cr.Err == nil {
				t.Fatalf("ran %v (count %d), err %v", cr.Ran, n.Load(), cr.Err)
			}
			if got := actgate.CodeOf(cr.Err); got != tc.code {
				t.Errorf("code %s, want %s (%v)", got, tc.code, cr.Err)
			}
		})
	}
}

// TestEscalationWaitHonoursContext: a payment escalates and nobody resolves it; Run with Wait
// gives up when the host's context ends, returns the moment, and never runs the tool. Polling
// raised no second moment.
func TestEscalationWaitHonoursContext(t *testing.T) {
	up := startUpstream(t)
	g := startGate(t, map[string]string{"finance": up.URL})
	tools := hostTools(t, up.URL)
	tu := anthropic.ToolUseBlock{ID: "toolu_wait", Name: "send_payment", Input: json.RawMessage(`{"to":"dave","amount":20}`)}
	ctx, cancel := context.WithTimeout(testCtx(t), 2*time.Second)
	defer cancel()
	var first actgate.Decision
	_, cr := g.client().RunAnthropicToolUse(ctx, tu, tools, actgate.RunOptions{EnforceOptions: actgate.EnforceOptions{Session: session("wait"), Provenance: actgate.ProvenanceUser},
		Wait: true, PollInterval: 100 * time.Millisecond, OnEscalation: func(d actgate.Decision) { first = d }})
	if !errors.Is(cr.Err, context.DeadlineExceeded) || cr.Ran || !cr.Pending {
		t.Fatalf("ran %v, pending %v, err %v", cr.Ran, cr.Pending, cr.Err)
	}
	if len(first.BindingMoments) != 1 || len(cr.Decision.BindingMoments) != 1 || cr.Decision.BindingMoments[0] != first.BindingMoments[0] {
		t.Errorf("polling raised another moment: first %v, last %v", first.BindingMoments, cr.Decision.BindingMoments)
	}
	if e := parseError(t, cr.Text); e.Error.Code != actgate.CodeEscalationRequired {
		t.Errorf("code %s", e.Error.Code)
	}
	if got := up.Count("send_payment"); got != 0 {
		t.Errorf("upstream ran send_payment %d times, want 0", got)
	}
}

// TestToolFailureReported: an allowed call whose tool fails is reported as failed (the dispatch
// is settled: a second report is HOSTLOOP_SETTLED); the model reads the tool's error, marked
// invoked.
func TestToolFailureReported(t *testing.T) {
	up := startUpstream(t)
	g := startGate(t, map[string]string{"finance": up.URL})
	gc := g.client()
	tools := actgate.Tools{"email_send": func(context.Context, actgate.Call) (string, error) {
		return "", errors.New("smtp: mailbox unavailable")
	}}
	tu := anthropic.ToolUseBlock{ID: "toolu_fail", Name: "email_send", Input: json.RawMessage(`{"to":"erin@example.com"}`)}
	ctx := testCtx(t)
	_, cr := gc.RunAnthropicToolUse(ctx, tu, tools, actgate.RunOptions{EnforceOptions: actgate.EnforceOptions{Session: session("fail"), Provenance: actgate.ProvenanceUser}})
	if !cr.Ran || !cr.IsError || cr.ToolErr == nil {
		t.Fatalf("%+v", cr)
	}
	if cr.Decision.OperationID != "" {
		if cr.Outcome != actgate.Failed || cr.CompleteErr != nil {
			t.Errorf("outcome %q, report error %v", cr.Outcome, cr.CompleteErr)
		}
		if err := gc.Complete(ctx, cr.Decision.OperationID, actgate.Executed, nil); actgate.CodeOf(err) != actgate.ErrCodeSettled {
			t.Errorf("second report: %v", err)
		}
	} else {
		t.Errorf("an email under a machine permit was not journaled: %+v", cr.Decision)
	}
	if !strings.Contains(cr.Text, `"invoked":true`) || !strings.Contains(cr.Text, "mailbox unavailable") {
		t.Errorf("the model reads %q", cr.Text)
	}
}

// TestHotPathAllowsEveryCall: 300 calls of an INFORMATIONAL tool (the hot path: no authority,
// nothing journaled) through the wrapper each get an allow and run once. The gate answers the
// hot path's allow even when its result is ready at the same moment (internal/hostloop), so
// the upstream's count is exactly 300.
func TestHotPathAllowsEveryCall(t *testing.T) {
	up := startUpstream(t)
	g := startGate(t, map[string]string{"finance": up.URL})
	tools := hostTools(t, up.URL)
	gc := g.client()
	ctx := testCtx(t)
	const calls = 300
	for i := range calls {
		tu := anthropic.ToolUseBlock{ID: "toolu_hot" + strconv.Itoa(i), Name: "get_balance", Input: json.RawMessage(`{"account":"main"}`)}
		_, cr := gc.RunAnthropicToolUse(ctx, tu, tools, actgate.RunOptions{EnforceOptions: actgate.EnforceOptions{Session: session("hot"), Provenance: actgate.ProvenanceUser}})
		if !cr.Ran || cr.IsError {
			t.Fatalf("call %d: allow %v, code %q, text %s", i, cr.Decision.Allow, cr.Decision.Code, cr.Text)
		}
	}
	if got := up.Count("get_balance"); got != calls {
		t.Errorf("upstream ran get_balance %d times, want %d", got, calls)
	}
}
