package actgate

import (
	"context"
	"encoding/json"
	"errors"
)

// Call is one tool call a model asked for, as the vendor helpers hand it to a Tool after the
// gate allowed it.
type Call struct {
	// ID is the vendor's id of the call (tool_use id, tool_calls[].id, call_id).
	ID string
	// Name is the tool's name.
	Name string
	// Arguments is the arguments object, exactly as the gate decided it.
	Arguments json.RawMessage
	// Decision is the allow (Decision.OperationID is the idempotency key).
	Decision Decision
}

// Tool runs one tool call and returns the text the model reads. An error is the tool's own
// failure (reported as failed, or indeterminate for ErrIndeterminate and a cancelled context).
type Tool func(ctx context.Context, call Call) (string, error)

// Tools are the host's tools by name.
type Tools map[string]Tool

// CallResult is what a vendor helper did with one call: Run's Result and the text the model
// reads in the tool result (the tool's text, its error, or the gate's refusal).
type CallResult struct {
	Result
	// ID and Name are the call's.
	ID, Name string
	// Text is the tool result's text for the model.
	Text string
	// IsError: the tool result is an error (a refusal, a failure, or no decision).
	IsError bool
	// Err is why there is no decision (the tool was not run).
	Err error
}

// runCall is the vendor-neutral part of the helpers: it runs one call through Run and says
// what the model reads.
func (c *Client) runCall(ctx context.Context, block json.RawMessage, id, name string, args json.RawMessage, tools Tools, o RunOptions) CallResult {
	cr := CallResult{ID: id, Name: name}
	tool, ok := tools[name]
	if !ok || tool == nil {
		// Nothing would run: no need to ask the gate about it.
		cr.Text, cr.IsError = errorText("HOSTLOOP_UNKNOWN_TOOL", "this host has no tool named "+clip(name)), true
		return cr
	}
	r, err := c.Run(ctx, block, o, func(ctx context.Context, d Decision) (json.RawMessage, error) {
		text, err := tool(ctx, Call{ID: id, Name: name, Arguments: args, Decision: d})
		if err != nil {
			return nil, err
		}
		return json.Marshal(text)
	})
	cr.Result = r
	switch {
	case err != nil && r.Pending:
		cr.Err = err
		cr.Text, cr.IsError = denyText(r.Decision), true
	case err != nil:
		cr.Err = err
		msg := "the gate gave no decision; the tool was not run"
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			msg = "the host stopped before the gate decided; the tool was not run"
		}
		code := CodeOf(err)
		if code == "" {
			code = ErrCodeUnavailable
		}
		cr.Text, cr.IsError = errorText(code, msg), true
	case r.Decision.Replayed:
		cr.Text = toolText(r.Output)
	case !r.Ran:
		cr.Text, cr.IsError = denyText(r.Decision), true
	case r.ToolErr != nil:
		cr.Text, cr.IsError = toolErrorText(r.ToolErr), true
	default:
		cr.Text = toolText(r.Output)
	}
	return cr
}

// denyText is the error object text of a refusal: the text inside the gate's vendor-shaped
// deny, else one built from the decision.
func denyText(d Decision) string {
	var probe struct {
		Content json.RawMessage `json:"content"`
		Output  string          `json:"output"`
	}
	if len(d.Deny) > 0 && json.Unmarshal(d.Deny, &probe) == nil {
		var s string
		if json.Unmarshal(probe.Content, &s) == nil && s != "" {
			return s // Chat Completions tool message
		}
		var blocks []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(probe.Content, &blocks) == nil && len(blocks) == 1 && blocks[0].Type == "text" {
			return blocks[0].Text // Anthropic tool_result
		}
		if probe.Output != "" {
			return probe.Output // Responses function_call_output
		}
	}
	code := d.Code
	if code == "" {
		code = "EF_UNKNOWN"
	}
	return errorText(code, d.Message)
}
