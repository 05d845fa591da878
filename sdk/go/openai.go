package actgate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
)

// openAIToolCall is the Chat Completions tool_calls[] entry the gate maps (tool-use-binding §7).
type openAIToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// OpenAIChatBlock is the JSON of a Chat Completions function tool call for Enforce.
func OpenAIChatBlock(tc openai.ChatCompletionMessageToolCallUnion) (json.RawMessage, error) {
	if tc.Type != "function" {
		return nil, fmt.Errorf("actgate: tool call %s is of type %q: only function calls are mapped", clip(tc.ID), clip(tc.Type))
	}
	var b openAIToolCall
	b.ID, b.Type = tc.ID, "function"
	b.Function.Name, b.Function.Arguments = tc.Function.Name, tc.Function.Arguments
	return json.Marshal(b)
}

// RunOpenAIToolCall runs one Chat Completions tool call through the gate with the tool of its
// name and returns the tool message for the next request: the tool's text, its error, or the
// gate's refusal (the EF code, invoked: false).
func (c *Client) RunOpenAIToolCall(ctx context.Context, tc openai.ChatCompletionMessageToolCallUnion, tools Tools,
	o RunOptions) (openai.ChatCompletionMessageParamUnion, CallResult) {
	o.Vendor = VendorOpenAI
	name := tc.Function.Name
	block, err := OpenAIChatBlock(tc)
	var cr CallResult
	if err != nil {
		cr = CallResult{ID: tc.ID, Name: name, Err: err, IsError: true, Text: errorText("EF_NOT_TOOL_CALL", "only function tool calls can run; the tool was not run")}
	} else {
		args := json.RawMessage(tc.Function.Arguments)
		if !json.Valid(args) {
			args = nil // the gate refuses it: the tool never sees it
		}
		cr = c.runCall(ctx, block, tc.ID, name, args, tools, o)
	}
	return openai.ToolMessage(cr.Text, tc.ID), cr
}

// RunOpenAIChatMessage runs every tool call of an assistant message through the gate, each its
// own act (tool-use-binding §9), in order, and returns one tool message per call. The error
// joins the calls' errors (no decision: not run); every call still has its tool message.
func (c *Client) RunOpenAIChatMessage(ctx context.Context, msg openai.ChatCompletionMessage, tools Tools,
	o RunOptions) ([]openai.ChatCompletionMessageParamUnion, []CallResult, error) {
	out := make([]openai.ChatCompletionMessageParamUnion, 0, len(msg.ToolCalls))
	results := make([]CallResult, 0, len(msg.ToolCalls))
	var errs []error
	for _, tc := range msg.ToolCalls {
		m, cr := c.RunOpenAIToolCall(ctx, tc, tools, o)
		out, results = append(out, m), append(results, cr)
		if cr.Err != nil {
			errs = append(errs, fmt.Errorf("tool call %s: %w", tc.ID, cr.Err))
		}
	}
	return out, results, errors.Join(errs...)
}

// responsesFunctionCall is the Responses function_call item the gate maps.
type responsesFunctionCall struct {
	Type      string `json:"type"`
	ID        string `json:"id,omitempty"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Status    string `json:"status,omitempty"`
}

// ResponsesBlock is the JSON of a Responses function_call item for Enforce.
func ResponsesBlock(fc responses.ResponseFunctionToolCall) (json.RawMessage, error) {
	return json.Marshal(responsesFunctionCall{Type: "function_call", ID: fc.ID, CallID: fc.CallID, Name: fc.Name, Arguments: fc.Arguments,
		Status: string(fc.Status)})
}

// RunResponsesFunctionCall runs one Responses function_call through the gate with the tool of
// its name and returns the function_call_output input item for the next request.
func (c *Client) RunResponsesFunctionCall(ctx context.Context, fc responses.ResponseFunctionToolCall, tools Tools,
	o RunOptions) (responses.ResponseInputItemUnionParam, CallResult) {
	o.Vendor = VendorOpenAIResponses
	block, err := ResponsesBlock(fc)
	var cr CallResult
	if err != nil {
		cr = CallResult{ID: fc.CallID, Name: fc.Name, Err: err, IsError: true, Text: errorText(ErrCodeBadRequest, "the function_call could not be encoded")}
	} else {
		args := json.RawMessage(fc.Arguments)
		if !json.Valid(args) {
			args = nil
		}
		cr = c.runCall(ctx, block, fc.CallID, fc.Name, args, tools, o)
	}
	item := responses.ResponseInputItemParamOfFunctionCallOutput(cr.Text)
	item.OfFunctionCallOutput.CallID = param.NewOpt(fc.CallID)
	return item, cr
}

// RunResponsesOutput runs every function_call item of a response's output through the gate,
// each its own act (tool-use-binding §9), in order, and returns one function_call_output item
// per call. Other host-run call items (custom_tool_call, computer_call, shell calls) are not
// mapped by the gate: they are not run and get no item here; the error names them.
func (c *Client) RunResponsesOutput(ctx context.Context, output []responses.ResponseOutputItemUnion, tools Tools,
	o RunOptions) ([]responses.ResponseInputItemUnionParam, []CallResult, error) {
	var (
		out     []responses.ResponseInputItemUnionParam
		results []CallResult
		errs    []error
	)
	for _, item := range output {
		switch item.Type {
		case "function_call":
			fc := item.AsFunctionCall()
			in, cr := c.RunResponsesFunctionCall(ctx, fc, tools, o)
			out, results = append(out, in), append(results, cr)
			if cr.Err != nil {
				errs = append(errs, fmt.Errorf("function_call %s: %w", fc.CallID, cr.Err))
			}
		case "custom_tool_call", "computer_call", "local_shell_call", "shell_call", "apply_patch_call":
			errs = append(errs, fmt.Errorf("actgate: output item of type %s is not mapped by the gate; not run", item.Type))
		}
	}
	return out, results, errors.Join(errs...)
}
