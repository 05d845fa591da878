package actgate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"
)

// anthropicToolUse is the tool_use block the gate maps (tool-use-binding §6): the block's id,
// name and input exactly as the model produced them.
type anthropicToolUse struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input,omitempty"`
}

// AnthropicBlock is the JSON of a tool_use block for Enforce.
func AnthropicBlock(b anthropic.ToolUseBlock) (json.RawMessage, error) {
	return json.Marshal(anthropicToolUse{Type: "tool_use", ID: b.ID, Name: b.Name, Input: b.Input})
}

// RunAnthropicToolUse runs one tool_use block through the gate (Run) with the tool of its name
// and returns the tool_result block for the next user message: the tool's text, its error, or
// the gate's refusal (is_error, the EF code, invoked: false).
func (c *Client) RunAnthropicToolUse(ctx context.Context, b anthropic.ToolUseBlock, tools Tools, o RunOptions) (anthropic.ContentBlockParamUnion, CallResult) {
	o.Vendor = VendorAnthropic
	block, err := AnthropicBlock(b)
	var cr CallResult
	if err != nil {
		cr = CallResult{ID: b.ID, Name: b.Name, Err: err, Text: errorText(ErrCodeBadRequest, "the tool_use block could not be encoded"), IsError: true}
	} else {
		cr = c.runCall(ctx, block, b.ID, b.Name, b.Input, tools, o)
	}
	if !cr.Ran && !cr.Decision.Replayed && len(cr.Decision.Deny) > 0 {
		var p anthropic.ToolResultBlockParam
		if json.Unmarshal(cr.Decision.Deny, &p) == nil && p.ToolUseID == b.ID {
			return anthropic.ContentBlockParamUnion{OfToolResult: &p}, cr
		}
	}
	return anthropic.NewToolResultBlock(b.ID, cr.Text, cr.IsError), cr
}

// RunAnthropicMessage runs every tool_use block of msg through the gate, each its own act
// (tool-use-binding §9: parallel calls of one turn are decided separately), in the message's
// order, and returns the tool_result blocks to send back as the next user message. A message
// cut off by max_tokens runs none of its calls: a tool_use block's input may be incomplete. The
// error joins the calls' errors (no decision: not run); every call still has its tool_result.
func (c *Client) RunAnthropicMessage(ctx context.Context, msg *anthropic.Message, tools Tools, o RunOptions) ([]anthropic.ContentBlockParamUnion, []CallResult, error) {
	var (
		blocks  []anthropic.ContentBlockParamUnion
		results []CallResult
		errs    []error
	)
	cutOff := msg.StopReason == anthropic.StopReasonMaxTokens
	for _, cb := range msg.Content {
		if cb.Type != "tool_use" {
			continue
		}
		tu := cb.AsToolUse()
		if cutOff {
			cr := CallResult{ID: tu.ID, Name: tu.Name, IsError: true, Err: errors.New("actgate: the message was cut off by max_tokens; its tool calls are not run"),
				Text: errorText("EF_PARTIAL_BLOCK", "the message was cut off before the call was complete; the tool was not run")}
			blocks, results, errs = append(blocks, anthropic.NewToolResultBlock(tu.ID, cr.Text, true)), append(results, cr), append(errs, cr.Err)
			continue
		}
		b, cr := c.RunAnthropicToolUse(ctx, tu, tools, o)
		blocks, results = append(blocks, b), append(results, cr)
		if cr.Err != nil {
			errs = append(errs, fmt.Errorf("tool_use %s: %w", tu.ID, cr.Err))
		}
	}
	return blocks, results, errors.Join(errs...)
}

// AccumulateAnthropicStream reads a streamed message to its end with the SDK's own accumulator
// (anthropic.Message.Accumulate) and returns the complete message. Nothing is enforced while
// the stream runs: a tool_use block's input arrives in partial JSON deltas and is decided only
// once complete (tool-use-binding §9), by RunAnthropicMessage on the returned message. A stream
// that fails or ends before message_stop returns an error and no message to run.
func AccumulateAnthropicStream(stream *ssestream.Stream[anthropic.MessageStreamEventUnion]) (anthropic.Message, error) {
	defer func() { _ = stream.Close() }()
	var msg anthropic.Message
	stopped := false
	for stream.Next() {
		ev := stream.Current()
		if err := msg.Accumulate(ev); err != nil {
			return anthropic.Message{}, fmt.Errorf("actgate: accumulating the stream: %w", err)
		}
		if ev.Type == "message_stop" {
			stopped = true
		}
	}
	if err := stream.Err(); err != nil {
		return anthropic.Message{}, fmt.Errorf("actgate: the stream failed: %w", err)
	}
	if !stopped {
		return anthropic.Message{}, errors.New("actgate: the stream ended before message_stop; its tool calls are not run")
	}
	for _, cb := range msg.Content {
		if cb.Type == "tool_use" && !json.Valid(cb.Input) {
			return anthropic.Message{}, fmt.Errorf("actgate: tool_use %s has incomplete input; not run", cb.ID)
		}
	}
	return msg, nil
}
