package upstream

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/mcpproxy/wire"
	"github.com/actgate/actgate/internal/sink"
)

// TestClassify is the pure classification table behind the invoker.
func TestClassify(t *testing.T) {
	sent := func(status int) *Attempt {
		a := &Attempt{}
		a.wrote.Store(true)
		a.status.Store(int32(status))
		return a
	}
	notWritten := &Attempt{}
	ok := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}
	bad := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "no"}}, IsError: true}
	other := errors.New("boom")
	for _, tc := range []struct {
		name string
		res  *mcp.CallToolResult
		err  error
		a    *Attempt
		want sink.InvokeOutcome
	}{
		{"result", ok, nil, sent(200), sink.OutcomeExecuted},
		{"isError result", bad, nil, sent(200), sink.OutcomeFailed},
		{"parse error", nil, &jsonrpc.Error{Code: wire.CodeParseError}, sent(200), sink.OutcomeFailed},
		{"invalid request", nil, &jsonrpc.Error{Code: wire.CodeInvalidRequest}, sent(200), sink.OutcomeFailed},
		{"method not found", nil, &jsonrpc.Error{Code: wire.CodeMethodNotFound}, sent(200), sink.OutcomeFailed},
		{"invalid params", nil, fmt.Errorf("wrapped: %w", &jsonrpc.Error{Code: wire.CodeInvalidParams}), sent(200), sink.OutcomeFailed},
		{"internal error", nil, &jsonrpc.Error{Code: wire.CodeInternalError}, sent(200), sink.OutcomeIndeterminate},
		{"server error", nil, &jsonrpc.Error{Code: -32000}, sent(200), sink.OutcomeIndeterminate},
		{"400", nil, other, sent(400), sink.OutcomeFailed},
		{"401", nil, other, sent(401), sink.OutcomeFailed},
		{"403", nil, other, sent(403), sink.OutcomeFailed},
		{"404 session gone", nil, other, sent(404), sink.OutcomeFailed},
		{"408", nil, other, sent(408), sink.OutcomeIndeterminate},
		{"429", nil, other, sent(429), sink.OutcomeIndeterminate},
		{"500", nil, other, sent(500), sink.OutcomeIndeterminate},
		{"502", nil, other, sent(502), sink.OutcomeIndeterminate},
		{"timeout after sending", nil, context.DeadlineExceeded, sent(200), sink.OutcomeIndeterminate},
		{"connection closed after sending", nil, mcp.ErrConnectionClosed, sent(0), sink.OutcomeIndeterminate},
		{"dial refused", nil, other, notWritten, sink.OutcomeNotSent},
		{"SDK rejection before sending", nil, fmt.Errorf("x: %w: %w", &jsonrpc.Error{Code: -32005, Message: "rejected by transport"}, other), notWritten, sink.OutcomeNotSent},
		{"SDK rejection after sending", nil, fmt.Errorf("x: %w: %w", &jsonrpc.Error{Code: -32005, Message: "rejected by transport"}, other), sent(200), sink.OutcomeIndeterminate},
		{"upstream error behind an SDK rejection", nil, fmt.Errorf("x: %w: %w", &jsonrpc.Error{Code: -32005}, &jsonrpc.Error{Code: wire.CodeInvalidParams}), sent(200), sink.OutcomeFailed},
		{"client closing after sending", nil, &jsonrpc.Error{Code: -32003}, sent(0), sink.OutcomeIndeterminate},
		{"timeout before sending", nil, context.DeadlineExceeded, notWritten, sink.OutcomeNotSent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := Classify(tc.res, tc.err, tc.a)
			if got.Outcome != tc.want {
				t.Fatalf("outcome %s, want %s", got.Outcome, tc.want)
			}
			if (got.Outcome == sink.OutcomeExecuted || got.Outcome == sink.OutcomeFailed || got.Outcome == sink.OutcomeNotSent) && len(got.Result) == 0 {
				t.Fatal("an authoritative outcome without a result for the agent")
			}
		})
	}
}

// TestSafeCause: an upstream's error text never reaches the log; transport errors do.
func TestSafeCause(t *testing.T) {
	secret := "card 4111-1111-1111-1111"
	sent := &Attempt{}
	sent.wrote.Store(true)
	if c := SafeCause(fmt.Errorf("x: %w", &jsonrpc.Error{Code: -32000, Message: secret}), sent); strings.Contains(c, secret) || !strings.Contains(c, "-32000") {
		t.Errorf("JSON-RPC error: %q", c)
	}
	st := &Attempt{}
	st.status.Store(500)
	if c := SafeCause(errors.New("Internal Server Error: "+secret), st); strings.Contains(c, secret) || !strings.Contains(c, "500") {
		t.Errorf("HTTP error: %q", c)
	}
	if c := SafeCause(errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), &Attempt{}); !strings.Contains(c, "connection refused") {
		t.Errorf("transport error: %q", c)
	}
}
