package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/hostloop"
)

// hostLoopClient speaks the host-loop API (docs/api.md "Host loops (/v1/enforce,
// /v1/complete)") as a host loop does: POST a vendor block to /v1/enforce before running the
// tool, POST the outcome to /v1/complete after. token is the agent's (serve); empty for the
// pod's sidecar.
type hostLoopClient struct {
	base, token string
	http        *http.Client
}

// post sends body to path and returns the HTTP status and the answer's bytes.
func (c *hostLoopClient) post(ctx context.Context, path string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(c.base, "/")+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return resp.StatusCode, b, err
}

// enforce asks the gate about one block; a refused request (not a refused call) is an error
// naming its HOSTLOOP_* code.
func (c *hostLoopClient) enforce(ctx context.Context, r hostloop.EnforceRequest) (hostloop.Decision, error) {
	return hostLoopCall[hostloop.Decision](ctx, c, hostloop.EnforcePath, r)
}

// complete reports the outcome of a dispatch the gate allowed.
func (c *hostLoopClient) complete(ctx context.Context, r hostloop.CompleteRequest) (hostloop.CompleteResponse, error) {
	return hostLoopCall[hostloop.CompleteResponse](ctx, c, hostloop.CompletePath, r)
}

// hostLoopCall posts req to path and decodes a 200 answer into T.
func hostLoopCall[T any](ctx context.Context, c *hostLoopClient, path string, req any) (T, error) {
	var out T
	body, err := json.Marshal(req)
	if err != nil {
		return out, err
	}
	status, b, err := c.post(ctx, path, body)
	if err != nil {
		return out, err
	}
	if status != http.StatusOK {
		return out, answerError(status, b)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return out, fmt.Errorf("unreadable answer: %w", err)
	}
	return out, nil
}

func answerError(status int, b []byte) error {
	var e hostloop.ErrorResponse
	if json.Unmarshal(b, &e) == nil && e.Error.Code != "" {
		return fmt.Errorf("HTTP %d %s: %s", status, e.Error.Code, e.Error.Message)
	}
	return fmt.Errorf("HTTP %d", status)
}

// runTool is a host loop's own tool: it calls tool on the MCP server at url directly (the
// host is the executor; the gate decided before) and returns its text: the JSON it is, or
// {"text": …}.
func runTool(ctx context.Context, url string, hc *http.Client, tool string, args json.RawMessage) (json.RawMessage, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "host-loop", Version: "v1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return nil, err
	}
	if res.IsError {
		return nil, fmt.Errorf("%s: %s", tool, firstText(res))
	}
	if t := firstText(res); json.Valid([]byte(t)) {
		return json.RawMessage(t), nil
	}
	return json.Marshal(map[string]string{"text": firstText(res)})
}
