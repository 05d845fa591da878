package actgate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// DefaultPollInterval is how often Run asks again while a binding moment waits for its
// principal (RunOptions.Wait).
const DefaultPollInterval = time.Second

// completeTimeout bounds the outcome report after the tool ran, whatever the caller's context:
// the gate records the outcome even when the host is being cancelled.
const completeTimeout = 10 * time.Second

// ErrIndeterminate is what a ToolFunc returns (wrapped or not) when it cannot know whether the
// tool took effect (a timeout, a lost connection): Run reports the outcome as indeterminate.
var ErrIndeterminate = errors.New("actgate: the tool's outcome is unknown")

// ToolFunc runs the tool once. d is the allow: d.OperationID is the idempotency key to give a
// tool that takes one. It returns the tool's result as JSON; an error means the tool failed
// (Failed) or, for ErrIndeterminate and a cancelled ctx, that nobody knows (Indeterminate).
type ToolFunc func(ctx context.Context, d Decision) (json.RawMessage, error)

// RunOptions are EnforceOptions and how to treat an escalation.
type RunOptions struct {
	EnforceOptions
	// Wait: on EF_ESCALATION_REQUIRED, ask again every PollInterval (same block, same session:
	// the gate raises no new moment for it) until the principal resolved the moment or ctx
	// ends. Without Wait, Run returns the escalation at once (Result.Pending).
	Wait bool
	// PollInterval; zero is DefaultPollInterval.
	PollInterval time.Duration
	// OnEscalation, when set, is called once with the first escalation (to show the moment to
	// the user) before Run waits.
	OnEscalation func(Decision)
}

// Result is what Run did with one call.
type Result struct {
	// Decision is the gate's last decision for the call.
	Decision Decision
	// Ran: the tool function was called (once).
	Ran bool
	// Output is the tool's result (Ran), or the result the gate recorded for a replayed call.
	Output json.RawMessage
	// ToolErr is the tool function's error (Ran).
	ToolErr error
	// Outcome is what was reported to the gate ("" on the hot path, where nothing is
	// journaled, and when nothing ran).
	Outcome Outcome
	// CompleteErr is why the outcome report failed (the tool ran; the gate marks the dispatch
	// INDETERMINATE when no outcome arrives).
	CompleteErr error
	// Deny is the refusal in the vendor's shape for the model (not Ran and not Replayed).
	Deny json.RawMessage
	// Pending: the call waits for a principal; Decision names the binding moment.
	Pending bool
}

// Refused reports whether the gate refused the call (including an unresolved escalation).
func (r Result) Refused() bool { return !r.Ran && !r.Decision.Replayed }

// Run enforces block and, on an allow, runs tool once and reports its outcome (executed,
// failed or indeterminate). On a refusal it returns the vendor-shaped refusal (Result.Deny)
// without running the tool; on an escalation it returns the moment (Result.Pending) or, with
// o.Wait, waits for its resolution; on a replay it returns the recorded result without running
// the tool. An error means there is no decision (transport, timeout, HOSTLOOP_*, ctx): the tool
// was not run.
func (c *Client) Run(ctx context.Context, block json.RawMessage, o RunOptions, tool ToolFunc) (Result, error) {
	if tool == nil {
		return Result{}, &Error{Code: ErrCodeBadRequest, Message: "no tool function"}
	}
	d, err := c.Enforce(ctx, block, o.EnforceOptions)
	if err != nil {
		return Result{}, err
	}
	if d.Escalated() && o.Wait {
		if o.OnEscalation != nil {
			o.OnEscalation(d)
		}
		d, err = c.waitResolved(ctx, block, o, d)
		if err != nil {
			return Result{Decision: d, Pending: d.Escalated(), Deny: d.Deny}, err
		}
	}
	switch {
	case d.Replayed:
		return Result{Decision: d, Output: d.Result}, nil
	case !d.Allow:
		return Result{Decision: d, Deny: d.Deny, Pending: d.Escalated()}, nil
	}
	return c.invoke(ctx, d, tool), nil
}

// waitResolved asks again until the decision is no longer an escalation, or ctx ends.
func (c *Client) waitResolved(ctx context.Context, block json.RawMessage, o RunOptions, d Decision) (Decision, error) {
	every := o.PollInterval
	if every <= 0 {
		every = DefaultPollInterval
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for d.Escalated() {
		select {
		case <-ctx.Done():
			return d, ctx.Err()
		case <-t.C:
		}
		next, err := c.Enforce(ctx, block, o.EnforceOptions)
		if err != nil {
			return d, err
		}
		d = next
	}
	return d, nil
}

// invoke runs the allowed tool once and reports its outcome for a journaled dispatch.
func (c *Client) invoke(ctx context.Context, d Decision, tool ToolFunc) (r Result) {
	r = Result{Decision: d, Ran: true}
	report := func(outcome Outcome, result json.RawMessage) {
		if d.OperationID == "" {
			return // the hot path: nothing journaled, nothing to report
		}
		r.Outcome = outcome
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), completeTimeout)
		defer cancel()
		r.CompleteErr = c.Complete(cctx, d.OperationID, outcome, result)
	}
	finished := false
	defer func() {
		if !finished {
			// The tool panicked: whether it took effect is unknown.
			report(Indeterminate, nil)
		}
	}()
	out, err := tool(ctx, d)
	finished = true
	r.Output, r.ToolErr = out, err
	switch {
	case err == nil:
		if out != nil && !json.Valid(out) {
			r.Output = nil
			r.ToolErr = fmt.Errorf("actgate: the tool's result is not JSON")
			report(Indeterminate, nil)
			return r
		}
		report(Executed, out)
	case errors.Is(err, ErrIndeterminate), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		report(Indeterminate, nil)
	default:
		msg, _ := json.Marshal(map[string]string{"error": err.Error()})
		report(Failed, msg)
	}
	return r
}

// errorText is the error object a vendor helper hands to the model when there is no decision
// (the gate could not be reached, or the call is not one the host can run): the tool was not
// invoked, as in the gate's own refusals.
func errorText(code, message string) string {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": code, "message": message, "retryable": false, "invoked": false}})
	return string(b)
}

// toolErrorText is the error object of a tool that ran and failed: invoked, unlike a refusal.
func toolErrorText(err error) string {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": "TOOL_FAILED", "message": err.Error(), "invoked": true}})
	return string(b)
}

// toolText is the text of a tool's result for a vendor's text-only tool result: a JSON string
// result is its string, anything else its JSON.
func toolText(out json.RawMessage) string {
	var s string
	if json.Unmarshal(out, &s) == nil {
		return s
	}
	return string(out)
}
