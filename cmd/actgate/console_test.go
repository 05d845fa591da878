package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/action"
	"github.com/actgate/actgate/internal/console"
	"github.com/actgate/actgate/internal/console/consoletest"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/jcs"
	"github.com/actgate/actgate/internal/standalone"
	"github.com/actgate/actgate/test/testutil"
)

// startConsole runs `actgate console` with args against g until the test ends, and returns
// the URL it prints.
func startConsole(t *testing.T, g *testGate, args ...string) string {
	t.Helper()
	var out, errb testutil.Buffer
	root := newRootCmd(streams{in: strings.NewReader(""), out: &out, err: &errb})
	root.SetArgs(append([]string{"console", "--data-dir", g.cfg.DataDir}, args...))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("actgate console: %v\n%s", err, errb.String())
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if line, ok := strings.CutPrefix(out.String(), "actgate console for "); ok && strings.HasSuffix(line, "\n") {
			_, url, _ := strings.Cut(strings.TrimSpace(line), ": ")
			return url
		}
		select {
		case err := <-done:
			t.Fatalf("actgate console ended: %v\n%s", err, errb.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("actgate console printed no URL: %q %q", out.String(), errb.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestConsoleRefusesNonLoopback: the console never listens beyond loopback.
func TestConsoleRefusesNonLoopback(t *testing.T) {
	g := startTestGate(t)
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:0"} {
		code, _, errOut := g.cli("console", "--as", "alice", "--address", addr)
		if code != exitUsage || !strings.Contains(errOut, "loopback") {
			t.Errorf("--address %s: exit %d %q", addr, code, errOut)
		}
	}
}

// TestConsoleInChromium: the standalone gate's web console in real headless Chromium. Four
// payments escalate to binding moments for alice; the page shows each with every envelope-04
// §9.1 invariant and the act's tool, server, class and action digest; alice resolves one with
// each of the four resolutions of §7.3 through the browser, and the gate records exactly that
// kind — the option issues authority, and the agent's call then runs once; the hatches and
// decline authorise nothing. A stale page is refused by the gate, in its words.
func TestConsoleInChromium(t *testing.T) {
	g := startTestGate(t)
	cs := g.agent()
	argsOf := func(i int) string { return fmt.Sprintf(`{"amount":%d,"to":"bob"}`, 250+i) }
	ids := make([]string, 5)
	for i := range ids {
		ids[i] = escalate(t, cs, argsOf(i))
	}
	url := startConsole(t, g, "--as", "alice")

	// The moments as the gate holds them, to compare the page with.
	api, err := (&apiFlags{dataDir: g.cfg.DataDir, as: "alice"}).client()
	if err != nil {
		t.Fatal(err)
	}
	state := func() map[string]standalone.MomentJSON {
		ms, err := api.Moments(context.Background(), true)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]standalone.MomentJSON{}
		for _, m := range ms {
			out[m.ID] = m
		}
		return out
	}
	before := state()

	ctx := consoletest.Browser(t)
	if err := consoletest.Load(ctx, url); err != nil {
		t.Fatal(err)
	}
	actOption := map[string]int{}
	for i, id := range ids {
		env, err := envelope.Parse(before[id].Envelope)
		if err != nil {
			t.Fatal(err)
		}
		digest, err := action.Digest("send_payment", json.RawMessage(argsOf(i)), jcs.Strict)
		if err != nil {
			t.Fatal(err)
		}
		consoletest.CheckInvariants(t, ctx, id, consoletest.Expect{Envelope: env,
			Act:   console.Act{Tool: "send_payment", Server: "finance", Class: "FINANCIAL", ActionDigest: digest},
			Calls: before[id].Calls, AgentAuthored: !before[id].GateAuthored})
		actOption[id] = -1
		for j := range env.NumOptions() {
			if o, _ := env.Option(j); o.ActionDigest == digest {
				actOption[id] = j
			}
		}
		if actOption[id] < 0 {
			t.Fatalf("%s: no option authorises the escalated call", id)
		}
		// The page showed that option's call as the gate holds it: the escalated call itself.
		if c := before[id].Calls[actOption[id]]; c.Tool != "send_payment" || string(c.Args) != argsOf(i) {
			t.Fatalf("%s: the gate reports option %d's call as %s %s, not the escalated call", id, actOption[id], c.Tool, c.Args)
		}
	}
	consoletest.Screenshot(t, ctx, "console-standalone")

	resolve := []struct {
		kind string
		do   func(id string) (consoletest.Outcome, error)
	}{
		{"option", func(id string) (consoletest.Outcome, error) { return consoletest.Choose(ctx, id, actOption[id]) }},
		{"answer", func(id string) (consoletest.Outcome, error) {
			return consoletest.Answer(ctx, id, "Pay half now.\nThe rest after the goods arrive.")
		}},
		{"question", func(id string) (consoletest.Outcome, error) { return consoletest.RejectQuestion(ctx, id) }},
		{"declined", func(id string) (consoletest.Outcome, error) { return consoletest.Decline(ctx, id) }},
	}
	for i, r := range resolve {
		id := ids[i]
		if err := consoletest.Load(ctx, url); err != nil {
			t.Fatal(err)
		}
		o, err := r.do(id)
		if err != nil {
			t.Fatalf("%s on %s: %v", r.kind, id, err)
		}
		if o.Status != "resolved" || !strings.Contains(o.Message, id+" resolved by alice") {
			t.Fatalf("%s on %s: outcome %+v", r.kind, id, o)
		}
		if r.kind == "option" && !strings.Contains(o.Message, "authority authz-") {
			t.Errorf("option: no authority reported: %q", o.Message)
		}
		if got := state()[id]; !got.Resolved || got.Resolution != r.kind {
			t.Fatalf("%s: the gate holds resolved=%v %q, want %s", id, got.Resolved, got.Resolution, r.kind)
		}
		if rd, err := consoletest.Read(ctx, id); err != nil || rd.Found {
			t.Errorf("%s is still shown as pending after its resolution (%v)", id, err)
		}
		if i == 0 {
			consoletest.Screenshot(t, ctx, "console-standalone-resolved")
		}
	}

	// Nothing ran before the agent made the authorised call; the hatches and decline
	// authorised nothing; the option's call runs exactly once.
	if n := g.up.Count("send_payment"); n != 0 {
		t.Fatalf("the upstream ran %d times before the agent's call", n)
	}
	for i := range 4 {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "send_payment", Arguments: json.RawMessage(argsOf(i))})
		if err != nil {
			t.Fatal(err)
		}
		if (i == 0) == res.IsError {
			t.Errorf("call %d after its %s resolution: is_error %v", i, resolve[i].kind, res.IsError)
		}
	}
	if n := g.up.Count("send_payment"); n != 1 {
		t.Fatalf("the upstream ran %d times, want once (the chosen option)", n)
	}

	// A stale page: the moment is resolved elsewhere after the page was loaded; the click is
	// refused and the gate's record stands.
	last := ids[4]
	if err := consoletest.Load(ctx, url); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := g.cli("resolve", last, "--as", "alice", "--decline"); code != exitOK {
		t.Fatalf("resolve from the CLI: %d %s", code, errOut)
	}
	o, err := consoletest.Choose(ctx, last, actOption[last])
	if err != nil {
		t.Fatal(err)
	}
	if o.Status != "refused" || !strings.Contains(o.Message, "no longer pending") {
		t.Errorf("stale page: outcome %+v", o)
	}
	if got := state()[last]; got.Resolution != "declined" {
		t.Errorf("the stale click changed the record to %q", got.Resolution)
	}
}
