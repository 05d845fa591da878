package diag

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
)

// Status is the outcome of one doctor check.
type Status string

// The outcomes: a FAIL makes the doctor exit non-zero; WARN and SKIP do not (SKIP says what
// could not be checked and why).
const (
	StatusOK   Status = "OK"
	StatusFail Status = "FAIL"
	StatusWarn Status = "WARN"
	StatusSkip Status = "SKIP"
)

// Check is one line of a doctor's report.
type Check struct {
	Status Status
	// Name is what was checked ("config", "upstream payments", "authority service").
	Name string
	// Detail says what was found, in words.
	Detail string
	// Reason is a stable code when the check maps to one (the constants above).
	Reason string
	// Fix is the command or value that fixes a FAIL or WARN.
	Fix string
}

// OK is a passed check; Fail, Warn and Skip build the other outcomes.
func OK(name, detail string) Check { return Check{Status: StatusOK, Name: name, Detail: detail} }

// Fail is a failed check with its fix.
func Fail(name, reason, detail, fix string) Check {
	if fix == "" {
		fix = Fix[reason]
	}
	return Check{Status: StatusFail, Name: name, Reason: reason, Detail: detail, Fix: fix}
}

// Warn is a check that found something to fix that does not stop the component.
func Warn(name, detail, fix string) Check {
	return Check{Status: StatusWarn, Name: name, Detail: detail, Fix: fix}
}

// Skip is a check that could not be made, with why.
func Skip(name, why string) Check { return Check{Status: StatusSkip, Name: name, Detail: why} }

// Print writes the checks, one block each ("OK   name  detail", then "     fix: …"), and
// returns how many failed. Every string is made terminal-safe.
func Print(w io.Writer, checks []Check) int {
	width := 0
	for _, c := range checks {
		width = max(width, len(c.Name))
	}
	failed := 0
	for _, c := range checks {
		detail := c.Detail
		if c.Reason != "" {
			detail = c.Reason + ": " + detail
		}
		fmt.Fprintf(w, "%-4s  %-*s  %s\n", c.Status, width, Safe(c.Name), Safe(detail))
		if c.Fix != "" && (c.Status == StatusFail || c.Status == StatusWarn) {
			fmt.Fprintf(w, "      %-*s  fix: %s\n", width, "", Safe(c.Fix))
		}
		if c.Status == StatusFail {
			failed++
		}
	}
	return failed
}

// Safe drops control characters, so text from a server or an object cannot draw lines of its
// own on a terminal.
func Safe(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return -1
		}
		return r
	}, s)
}

// MCPProtocolVersion is the revision the doctor's initialize asks for.
const MCPProtocolVersion = "2025-11-25"

// maxProbeBody bounds what is read of an upstream's answer to the doctor's initialize.
const maxProbeBody = 64 << 10

// ProbeMCP sends an MCP initialize to the streamable HTTP endpoint url, with token as bearer
// when set, and says whether an MCP server answered it: reason "" and the server's name and
// revision, or a reason (UpstreamUnreachable, UpstreamTLSFailure, UpstreamRefused,
// UpstreamBadURL) and what happened. The session it opens, if any, is deleted.
func ProbeMCP(ctx context.Context, hc *http.Client, url, token string) (reason, detail string) {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},`+
		`"clientInfo":{"name":"actgate-doctor","version":"0"}}}`, MCPProtocolVersion)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return UpstreamBadURL, err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		if TLSFailure(err) {
			return UpstreamTLSFailure, clip(err.Error())
		}
		return UpstreamUnreachable, clip(err.Error())
	}
	defer resp.Body.Close()
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
		defer deleteSession(ctx, hc, url, token, sid)
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxProbeBody))
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		if token == "" {
			return UpstreamRefused, fmt.Sprintf("HTTP %d to an initialize sent without a credential: the server wants one", resp.StatusCode)
		}
		return UpstreamRefused, fmt.Sprintf("HTTP %d: the server did not accept the credential", resp.StatusCode)
	case resp.StatusCode == http.StatusNotFound:
		return UpstreamBadURL, "HTTP 404: nothing answers MCP at this path (the URL is the server's streamable HTTP endpoint, e.g. …/mcp)"
	case resp.StatusCode/100 != 2:
		return UpstreamRefused, fmt.Sprintf("HTTP %d to MCP initialize", resp.StatusCode)
	}
	return parseInitialize(resp.Header.Get("Content-Type"), data)
}

// parseInitialize reads an upstream's answer to the doctor's initialize (untrusted bytes): a
// JSON-RPC result, from a JSON body or the first data line of an event stream.
func parseInitialize(contentType string, data []byte) (reason, detail string) {
	msg := data
	if ct, _, _ := mime.ParseMediaType(contentType); ct == "text/event-stream" {
		msg = nil
		for line := range bytes.SplitSeq(data, []byte("\n")) {
			if d, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r"), []byte("data:")); ok {
				msg = bytes.TrimSpace(d)
				break
			}
		}
	}
	var m struct {
		Result *struct {
			ProtocolVersion string `json:"protocolVersion"`
			ServerInfo      struct {
				Name    string `json:"name"`
				Version string `json:"version"`
			} `json:"serverInfo"`
		} `json:"result"`
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg, &m); err != nil {
		return UpstreamRefused, "the answer to MCP initialize is not JSON-RPC: not an MCP server at this URL?"
	}
	if m.Error != nil {
		return UpstreamRefused, fmt.Sprintf("MCP initialize refused: %d %s", m.Error.Code, clip(m.Error.Message))
	}
	if m.Result == nil {
		return UpstreamRefused, "the answer to MCP initialize carries no result"
	}
	return "", fmt.Sprintf("MCP server %q %s answers initialize (revision %s)",
		clip(m.Result.ServerInfo.Name), clip(m.Result.ServerInfo.Version), clip(m.Result.ProtocolVersion))
}

func deleteSession(ctx context.Context, hc *http.Client, url, token, sid string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, url, nil)
	if err != nil {
		return
	}
	req.Header.Set("Mcp-Session-Id", sid)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if resp, err := hc.Do(req); err == nil {
		_ = resp.Body.Close()
	}
}

// clip bounds a string from a server in a report.
func clip(s string) string {
	const n = 200
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
