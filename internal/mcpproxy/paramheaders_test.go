package mcpproxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// assigneeSchema declares the ticket's assignee as an Mcp-Param header (SEP-2243 x-mcp-header).
const assigneeSchema = `{"type":"object","properties":{"assignee":{"type":"string","x-mcp-header":"Assignee"},"title":{"type":"string"},"route":{"type":"object","properties":{"queue":{"type":"string","x-mcp-header":"Queue"}}}}}`

// TestParamHeadersFreshGate: on a gate that has not seen a tools/list, a tools/call's Mcp-Param
// headers are checked against the tool's x-mcp-header declarations all the same: the gate
// lists the upstream's tools first. A header that copies another value of the arguments than
// the one it declares, or that the tool does not declare, is refused with HTTP 400, -32020 and
// EF_MCP_HEADER_MISMATCH before anything is decided or forwarded (no act journaled, the
// upstream receives no tools/call); when the upstream's tools/list fails, a call carrying
// Mcp-Param headers is refused (the gate cannot say what they copy) and one without runs. Each
// case on a fresh gate, toward each kind of upstream.
func TestParamHeadersFreshGate(t *testing.T) {
	type result int
	const (
		refused result = iota
		runs
	)
	cases := []struct {
		name      string
		args      string
		hdr       map[string]string
		listFails bool
		want      result
	}{
		{"header copies another argument", `{"assignee":"bob","title":"mallory"}`, map[string]string{"Mcp-Param-Assignee": "mallory"}, false, refused},
		{"nested header copies another argument", `{"assignee":"bob","title":"mallory","route":{"queue":"ops"}}`, map[string]string{"Mcp-Param-Assignee": "bob", "Mcp-Param-Queue": "mallory"}, false, refused},
		{"undeclared header", `{"assignee":"bob","title":"mallory"}`, map[string]string{"Mcp-Param-Assignee": "bob", "Mcp-Param-Title": "mallory"}, false, refused},
		{"declared header without its argument", `{"assignee":"bob","title":"t"}`, map[string]string{"Mcp-Param-Queue": "x"}, false, refused},
		{"headers match", `{"assignee":"bob","title":"mallory","route":{"queue":"ops"}}`, map[string]string{"Mcp-Param-Assignee": "bob", "Mcp-Param-Queue": "ops"}, false, runs},
		{"base64 header matches", `{"assignee":"bob","title":"t"}`, map[string]string{"Mcp-Param-Assignee": "=?base64?Ym9i?="}, false, runs},
		{"tools/list fails, header", `{"assignee":"bob","title":"t"}`, map[string]string{"Mcp-Param-Assignee": "bob"}, true, refused},
		{"tools/list fails, no header", `{"title":"t"}`, nil, true, runs},
	}
	for _, up := range []struct {
		name string
		opts mcptest.Options
	}{
		{"stateless upstream", mcptest.Options{Stateless: true, JSONResponse: true}},
		{"stateful upstream", mcptest.Options{}},
	} {
		for _, tc := range cases {
			t.Run(up.name+"/"+tc.name, func(t *testing.T) {
				var wr wireTap
				opts := up.opts
				opts.Intercept = func(w http.ResponseWriter, r *http.Request) bool {
					wr.intercept(w, r)
					all := wr.all()
					if last := all[len(all)-1]; tc.listFails && last.Method == "tools/list" {
						w.Header().Set("Content-Type", "application/json")
						_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"down"}}`, last.ID)
						return true
					}
					return false
				}
				tools := []mcptest.Tool{{Name: "ticket_create", InputSchema: json.RawMessage(assigneeSchema)}}
				f := newFixture(t, fixtureOpts{upstream: opts, tools: tools})
				body := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"ticket_create","arguments":` + tc.args + `,` + meta2026 + `}}`
				hdr := hdr2026Of("tools/call", "ticket_create", "")
				for k, v := range tc.hdr {
					hdr[k] = v
				}
				status, out := rawRequest(t, http.MethodPost, f.endpoint(), "", body, hdr)
				var calls []wireMsg
				for _, m := range wr.all() {
					if m.Method == "tools/call" {
						calls = append(calls, m)
					}
				}
				switch tc.want {
				case refused:
					var m struct {
						Error struct {
							Code int64
							Data map[string]any
						}
					}
					_ = json.Unmarshal([]byte(out), &m)
					if status != http.StatusBadRequest || m.Error.Code != wire.CodeHeaderMismatch || m.Error.Data[MetaEFCode] != "EF_MCP_HEADER_MISMATCH" {
						t.Errorf("HTTP %d %s, want 400, -32020, EF_MCP_HEADER_MISMATCH", status, out)
					}
					if len(calls) != 0 || f.up.Count("") != 0 {
						t.Errorf("the upstream received %d tools/call (%v) and ran %d", len(calls), calls, f.up.Count(""))
					}
					if st := statesIn(t, f); len(st) != 0 {
						t.Errorf("journal states %v, want none", st)
					}
				case runs:
					if status != http.StatusOK || strings.Contains(out, `"isError":true`) || f.up.Count("ticket_create") != 1 {
						t.Fatalf("HTTP %d %s; the upstream ran it %d times, want once", status, out, f.up.Count("ticket_create"))
					}
					if st := statesIn(t, f); st[journal.StateExecuted] != 1 {
						t.Errorf("journal states %v, want one EXECUTED act", st)
					}
					if up.opts.Stateless && len(calls) == 1 {
						for k, v := range tc.hdr {
							if got := calls[0].Header.Get(k); got != v {
								t.Errorf("the upstream saw %s %q, want %q", k, got, v)
							}
						}
					}
				}
			})
		}
	}
}
