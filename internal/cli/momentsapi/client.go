// Package momentsapi is the command line's client of the standalone gate's local moments API
// (internal/standalone: GET /v1/moments, GET /v1/moments/{id}, POST /v1/moments/{id}/resolve;
// docs/operations.md "`actgate serve` (standalone)"), as one principal with its bearer token: what `actgate
// moments`, `actgate resolve`, `actgate console` and `actgate demo` speak. Its errors are the
// command line's (internal/cli): an API refusal exits rejected with the API's code first, an
// unreachable gate GATE_UNREACHABLE, anything else GATE_ERROR.
package momentsapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/actgate/actgate/internal/cli"
	"github.com/actgate/actgate/internal/standalone"
)

// maxAnswer bounds one answer the client reads.
const maxAnswer = 16 << 20

// Client speaks the moments API as one principal.
type Client struct {
	// Server is the gate's base URL, Principal who the token is, Token its bearer token.
	Server, Principal, Token string
	HTTP                     *http.Client
}

// do sends one request and decodes a 2xx JSON answer into out; an API error becomes a
// cli error with its code.
func (c *Client) do(ctx context.Context, method, path string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.Server, "/")+path, rd)
	if err != nil {
		return cli.UsageError("%v", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return cli.Fail(cli.ExitRejected, "GATE_UNREACHABLE "+err.Error())
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return cli.Fail(cli.ExitRejected, "GATE_UNREACHABLE "+err.Error())
	}
	if resp.StatusCode/100 != 2 {
		var e standalone.APIError
		if json.Unmarshal(b, &e) == nil && e.Error.Code != "" {
			return cli.Fail(cli.ExitRejected, e.Error.Code+" "+e.Error.Message)
		}
		return cli.Fail(cli.ExitRejected, fmt.Sprintf("GATE_ERROR HTTP %d", resp.StatusCode))
	}
	if err := json.Unmarshal(b, out); err != nil {
		return cli.Fail(cli.ExitRejected, "GATE_ERROR unreadable answer: "+err.Error())
	}
	return nil
}

// Moments lists the moments the principal may see: pending ones, or all with all.
func (c *Client) Moments(ctx context.Context, all bool) ([]standalone.MomentJSON, error) {
	var out struct {
		Moments []standalone.MomentJSON `json:"moments"`
	}
	path := standalone.APIMoments
	if all {
		path += "?all=1"
	}
	if err := c.do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return out.Moments, nil
}

// Moment reads one moment.
func (c *Client) Moment(ctx context.Context, id string) (standalone.MomentJSON, error) {
	var m standalone.MomentJSON
	err := c.do(ctx, http.MethodGet, standalone.APIMoments+"/"+url.PathEscape(id), nil, &m)
	return m, err
}

// Resolve sends the principal's resolution of a moment (envelope-04 §7.3) as given.
func (c *Client) Resolve(ctx context.Context, id string, resolution []byte) (standalone.ResolveJSON, error) {
	var r standalone.ResolveJSON
	err := c.do(ctx, http.MethodPost, standalone.APIMoments+"/"+url.PathEscape(id)+"/resolve", resolution, &r)
	return r, err
}

// Budgets lists the gate's budget ledgers that count something in their current window.
func (c *Client) Budgets(ctx context.Context) ([]standalone.BudgetJSON, error) {
	var out struct {
		Budgets []standalone.BudgetJSON `json:"budgets"`
	}
	if err := c.do(ctx, http.MethodGet, standalone.APIBudgets, nil, &out); err != nil {
		return nil, err
	}
	return out.Budgets, nil
}
