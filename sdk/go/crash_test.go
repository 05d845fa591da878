package actgate_test

// T-G (tool-use-binding §22): a host killed after the gate consumed the authority and before it
// invoked the tool never invokes it after a restart. The host is a separate process (this test
// binary run again with helperEnv set, see TestMain), killed with SIGKILL at that point.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	actgate "github.com/actgate/actgate/sdk/go"
)

// Environment of a host process.
const (
	helperEnv      = "ACTGATE_SDK_GO_HOST" // "first" (stop in the tool) or "restart" (run the tool)
	helperBase     = "ACTGATE_SDK_GO_BASE"
	helperToken    = "ACTGATE_SDK_GO_TOKEN"
	helperUpstream = "ACTGATE_SDK_GO_UPSTREAM"
	helperBlock    = "ACTGATE_SDK_GO_BLOCK"
	helperSession  = "ACTGATE_SDK_GO_SESSION"
)

// hostReport is what a host process prints of the call, on one line.
type hostReport struct {
	Ran      bool   `json:"ran"`
	Allow    bool   `json:"allow"`
	Replayed bool   `json:"replayed"`
	Code     string `json:"code"`
	State    string `json:"state"`
	Err      string `json:"err"`
}

// hostProcessMain is a host loop in its own process: it runs the tool_use block of
// helperBlock through the wrapper. In "first" mode its tool prints CONSUMED and the operation
// id, then waits to be killed before touching the upstream; in "restart" mode the tool calls the
// upstream, and the process prints a hostReport.
func hostProcessMain() int {
	mode := os.Getenv(helperEnv)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var tu anthropic.ToolUseBlock
	if err := json.Unmarshal([]byte(os.Getenv(helperBlock)), &tu); err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	cs, err := connectUpstream(ctx, os.Getenv(helperUpstream))
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	defer func() { _ = cs.Close() }()
	tools := toolsOf(cs)
	if mode == "first" {
		tools = actgate.Tools{"send_payment": func(ctx context.Context, c actgate.Call) (string, error) {
			fmt.Printf("CONSUMED %s\n", c.Decision.OperationID)
			_ = os.Stdout.Sync()
			<-ctx.Done() // killed here, before the upstream is called
			return "", ctx.Err()
		}}
	}
	gc := &actgate.Client{BaseURL: os.Getenv(helperBase), Token: os.Getenv(helperToken)}
	_, cr := gc.RunAnthropicToolUse(ctx, tu, tools, actgate.RunOptions{EnforceOptions: actgate.EnforceOptions{
		Session: os.Getenv(helperSession), Provenance: actgate.ProvenanceUser}})
	r := hostReport{Ran: cr.Ran, Allow: cr.Decision.Allow, Replayed: cr.Decision.Replayed, Code: cr.Decision.Code, State: cr.Decision.State}
	if cr.Err != nil {
		r.Err = cr.Err.Error()
	}
	b, _ := json.Marshal(r)
	fmt.Printf("REPORT %s\n", b)
	return 0
}

func hostProcess(t *testing.T, g *gate, up *upstream, mode string, block []byte) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, helperBase+"="+g.Base, helperToken+"="+g.Token, helperUpstream+"="+up.URL,
		helperBlock+"="+string(block), helperSession+"="+session("t-g"))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, bufio.NewScanner(out)
}

// TestHostKilledAfterConsumeNeverInvokes (T-G): alice authorises a payment; a host process
// enforces it (the gate consumes the authority and journals the dispatch) and is killed with
// SIGKILL inside the tool, before the upstream call. A restarted host process runs the same
// block in the same session: the gate does not allow it again, and the upstream's own count of
// send_payment stays 0.
func TestHostKilledAfterConsumeNeverInvokes(t *testing.T) {
	ctx := testCtx(t)
	up := startUpstream(t)
	g := startGate(t, map[string]string{"finance": up.URL})
	tu := anthropic.ToolUseBlock{ID: "toolu_crash", Name: "send_payment", Input: json.RawMessage(`{"to":"carol","amount":30}`)}
	block, _ := actgate.AnthropicBlock(tu)
	d, err := g.client().Enforce(ctx, block, actgate.EnforceOptions{Vendor: actgate.VendorAnthropic, Session: session("t-g"), Provenance: actgate.ProvenanceUser})
	if err != nil || !d.Escalated() {
		t.Fatalf("decision %+v, %v: want an escalation", d, err)
	}
	g.resolve(t, d.BindingMoments[0])

	first, out := hostProcess(t, g, up, "first", block)
	op := ""
	for out.Scan() {
		if rest, ok := strings.CutPrefix(out.Text(), "CONSUMED "); ok {
			op = rest
			break
		}
	}
	if op == "" {
		t.Fatal("the host process exited before the gate allowed the call")
	}
	if err := first.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	if got := up.Count("send_payment"); got != 0 {
		t.Fatalf("upstream ran send_payment %d times before the restart", got)
	}

	_, out = hostProcess(t, g, up, "restart", block)
	var r hostReport
	for out.Scan() {
		if rest, ok := strings.CutPrefix(out.Text(), "REPORT "); ok {
			if err := json.Unmarshal([]byte(rest), &r); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	t.Logf("restarted host: %+v", r)
	if r.Ran || r.Allow {
		t.Errorf("the restarted host ran the call: %+v", r)
	}
	if got := up.Count("send_payment"); got != 0 {
		t.Errorf("upstream ran send_payment %d times, want 0", got)
	}
}
