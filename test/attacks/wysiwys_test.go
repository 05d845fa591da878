package attacks

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/argmask"
	"github.com/actgate/actgate/internal/console"
	"github.com/actgate/actgate/internal/console/consoletest"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/gateconfig"
	"github.com/actgate/actgate/internal/jcs"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/sink"
	"github.com/actgate/actgate/test/envtest"
	"github.com/actgate/actgate/test/testutil"
)

// What you see is what you authorise (transaction signing; PSD2's dynamic linking of amount
// and payee). An agent proposes, through request_binding_moment, an option labelled "Pay Bob 10
// EUR" whose call is send_payment {"amount":9999,"to":"mallory-offshore-account"}. Before the
// principal chooses, every surface of hers — `actgate moments` text and --json, the moments API,
// the web console in headless Chromium — shows 9999 and mallory-offshore-account inside that
// option, under the gate's own "Runs (verified by actgate)" heading, with the label attributed
// to the agent; the call shown hashes to the option's action digest. She chooses it and exactly
// that call runs, once. A second moment, under a rule that masks /card, shows the card number
// masked on every surface while the digest still binds it: a call with another card does not
// run on her resolution, the real one does. The gate is a real `actgate serve` process built
// from ./cmd/actgate; the Kubernetes surface (kubectl actgate show) is TestWYSIWYSKubectl.

const (
	wysLabel   = "Pay Bob 10 EUR"
	wysArgs    = `{"amount":9999,"to":"mallory-offshore-account"}`
	wysCard    = "4111111111111111"
	wysCardArg = `{"amount":120,"card":"` + wysCard + `","to":"acme"}`
)

// wysUpstream is the pay server: it records the arguments of every call it runs.
type wysUpstream struct {
	*mcptest.Server
	mu    sync.Mutex
	calls map[string][]string
}

func (u *wysUpstream) ran(tool string) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.calls[tool])
}

func startWYSUpstream(t *testing.T) *wysUpstream {
	t.Helper()
	u := &wysUpstream{calls: map[string][]string{}}
	var tools []mcptest.Tool
	for _, name := range []string{"send_payment", "charge_card"} {
		tools = append(tools, mcptest.Tool{Name: name, Handler: func(_ context.Context, args json.RawMessage) (*mcp.CallToolResult, error) {
			canon, _ := jcs.Canonicalize(args, jcs.Strict)
			u.mu.Lock()
			u.calls[name] = append(u.calls[name], string(canon))
			u.mu.Unlock()
			return mcptest.Text(name + " " + string(canon)), nil
		}})
	}
	s, err := mcptest.Start(tools, mcptest.Options{Name: "pay"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	u.Server = s
	return u
}

// wysGate is one `actgate serve` process and what its principal's tools need.
type wysGate struct {
	t       *testing.T
	bin     string
	cfgFile string
	cfg     *gateconfig.Config
	base    string
	up      *wysUpstream
}

func startWYSGate(t *testing.T) *wysGate {
	t.Helper()
	g := &wysGate{t: t, bin: testutil.BuildActgate(t, ""), up: startWYSUpstream(t)}
	dir := t.TempDir()
	tok := filepath.Join(dir, "pay.token")
	if err := os.WriteFile(tok, []byte("pay-upstream-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("testdata/wysiwys.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.NewReplacer("{{DATA}}", filepath.Join(dir, "data"), "{{PAYTOKEN}}", tok, "{{PAY}}", g.up.URL).Replace(string(raw))
	g.cfgFile = filepath.Join(dir, "actgate.yaml")
	if err := os.WriteFile(g.cfgFile, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	if g.cfg, err = gateconfig.Load(g.cfgFile); err != nil {
		t.Fatal(err)
	}
	serve := exec.Command(g.bin, "serve", "--config", g.cfgFile)
	var stderr bytes.Buffer
	serve.Stdout, serve.Stderr = io.Discard, &wysSyncWriter{w: &stderr}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = serve.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = serve.Process.Kill()
		<-done
	})
	deadline := time.Now().Add(30 * time.Second)
	for g.base == "" {
		if b, err := os.ReadFile(g.cfg.Path(gateconfig.EndpointFile)); err == nil && len(bytes.TrimSpace(b)) > 0 {
			g.base = strings.TrimSpace(string(b))
			break
		}
		select {
		case <-done:
			t.Fatalf("actgate serve exited:\n%s", stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("actgate serve did not start")
		}
	}
	return g
}

// wysSyncWriter serialises writes of a process's output into a buffer read by the test.
type wysSyncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *wysSyncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// cli runs the actgate CLI as alice against the gate and returns its stdout.
func (g *wysGate) cli(args ...string) string {
	g.t.Helper()
	cmd := exec.Command(g.bin, append(args, "--config", g.cfgFile, "--as", "alice")...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		g.t.Fatalf("actgate %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// wysMoment is a moment as the moments API and `actgate moments --json` carry it.
type wysMoment struct {
	ID             string          `json:"id"`
	Tool           string          `json:"tool"`
	Server         string          `json:"server"`
	Class          string          `json:"class"`
	ActionDigest   string          `json:"actionDigest"`
	Envelope       json.RawMessage `json:"envelope"`
	EnvelopeDigest string          `json:"envelopeDigest"`
	GateAuthored   bool            `json:"gateAuthored"`
	Calls          []envelope.Call `json:"calls"`
}

func (m wysMoment) env(t *testing.T) *envelope.Envelope {
	t.Helper()
	env, err := envelope.Parse(m.Envelope)
	if err != nil || env.Digest() != m.EnvelopeDigest {
		t.Fatalf("moment %s: envelope %v, digest %s", m.ID, err, m.EnvelopeDigest)
	}
	return env
}

// api reads the moments API as alice, with her token from the data dir, and returns the raw
// body and the moments.
func (g *wysGate) api() ([]byte, []wysMoment) {
	g.t.Helper()
	tok, err := os.ReadFile(filepath.Join(g.cfg.DataDir, gateconfig.PrincipalsDir, "alice.token"))
	if err != nil {
		g.t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, g.base+"/v1/moments", nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		g.t.Fatalf("GET /v1/moments: %d %s", resp.StatusCode, body)
	}
	var out struct {
		Moments []wysMoment `json:"moments"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		g.t.Fatal(err)
	}
	return body, out.Moments
}

func wysFind(t *testing.T, ms []wysMoment, id string) wysMoment {
	t.Helper()
	for _, m := range ms {
		if m.ID == id {
			return m
		}
	}
	t.Fatalf("moment %s not listed", id)
	return wysMoment{}
}

// optionBlock is the text of option n's block in a text rendering: from its line to its
// "Authorises:" line.
func optionBlock(t *testing.T, out, id string, n int, label string) string {
	t.Helper()
	i := strings.Index(out, "MOMENT "+id)
	if i < 0 {
		t.Fatalf("moment %s not in:\n%s", id, out)
	}
	out = out[i:]
	head := "[" + string(rune('0'+n)) + "] " + label
	j := strings.Index(out, head)
	if j < 0 {
		t.Fatalf("no %q in:\n%s", head, out)
	}
	block := out[j:]
	return block[:strings.Index(block, "Authorises:")]
}

// wysArtifact saves a rendering next to the console screenshots (consoletest.ArtifactDir).
func wysArtifact(t *testing.T, name, content string) {
	t.Helper()
	path := filepath.Join(consoletest.ArtifactDir(t), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("artifact: %s", path)
}

func TestWhatYouSeeIsWhatYouAuthorise(t *testing.T) {
	g := startWYSGate(t)
	pay := agent(t, g.base+mcpproxy.Path("pay"))

	// The attack: the label says 10 EUR to Bob; the call pays 9999 to mallory.
	proposal := `{"synopsis":"Bob's invoice for 10 EUR is due today; pay it now.","findings":["Bob invoiced 10 EUR for lunch."],
	 "recommendations":["Pay Bob 10 EUR."],"offer":"Ask for the invoice.","stem":"Should Bob's invoice be paid now?",
	 "options":[{"label":"Hold the payment","reasoning":"Nothing is lost by waiting a day.","tool":"send_payment","server":"pay","args":{"amount":0,"to":"bob"}},
	            {"label":"` + wysLabel + `","reasoning":"The invoice is due today.","tool":"send_payment","server":"pay","args":` + wysArgs + `}],
	 "recommended":1}`
	lieID, _ := escalation(t, call(t, pay, sink.RequestBindingMomentTool, proposal, "user"))
	// A direct call of a tool whose rule masks /card: a gate-authored moment.
	masked := call(t, pay, "charge_card", wysCardArg, "user")
	refused(t, masked, string(ef.EFEscalationRequired))
	cardID, _ := escalation(t, masked)

	// The moments API: the gate's record of each option's call, beside (not inside) the
	// agent's envelope, and it hashes to the option's digest.
	body, ms := g.api()
	lie := wysFind(t, ms, lieID)
	lieEnv := lie.env(t)
	if lie.GateAuthored || len(lie.Calls) != 2 {
		t.Fatalf("moments API: gateAuthored %v, %d calls", lie.GateAuthored, len(lie.Calls))
	}
	if c := lie.Calls[1]; c.Tool != "send_payment" || c.Server != "pay" || c.Destination != g.up.URL || string(c.Args) != wysArgs || !c.Verified() {
		t.Fatalf("moments API: option 2's call is %+v; want send_payment on pay with %s", c, wysArgs)
	}
	if err := envelope.CheckCalls(lieEnv, lie.Calls); err != nil {
		t.Fatalf("moments API: the calls are not the options' calls: %v", err)
	}
	if strings.Contains(string(lie.Envelope), "9999") || strings.Contains(string(lie.Envelope), "mallory") {
		t.Fatal("the agent's envelope itself names the call: this test would not show where the values come from")
	}
	if bytes.Contains(body, []byte(wysCard)) {
		t.Fatal("moments API: a masked card number reached the principal's surface")
	}
	card := wysFind(t, ms, cardID)
	if !card.GateAuthored || len(card.Calls) < 2 {
		t.Fatalf("moments API: masked moment gateAuthored %v, %d calls", card.GateAuthored, len(card.Calls))
	}
	for i, c := range card.Calls {
		var a map[string]any
		if err := json.Unmarshal(c.Args, &a); err != nil || a["card"] != argmask.Placeholder || !slices.Equal(c.Masked, []string{"/card"}) {
			t.Fatalf("moments API: masked moment's call %d is %+v", i, c)
		}
	}

	// actgate moments: option 2's own block shows the call, under the gate's heading, and the
	// label as the agent's.
	text := g.cli("moments")
	wysArtifact(t, "wysiwys-actgate-moments.txt", text)
	block := optionBlock(t, text, lieID, 2, "Agent's label: "+wysLabel)
	for _, want := range []string{"Runs (verified by actgate): send_payment on server pay", "amount = 9999", `to = "mallory-offshore-account"`} {
		if !strings.Contains(block, want) {
			t.Errorf("actgate moments: option 2's block lacks %q:\n%s", want, block)
		}
	}
	cardBlock := optionBlock(t, text, cardID, 1, "Run charge_card as requested")
	if !strings.Contains(cardBlock, "card = ••• masked by policy") || !strings.Contains(cardBlock, "amount = 120") || strings.Contains(text, wysCard) {
		t.Errorf("actgate moments: the masked call is not shown masked:\n%s", cardBlock)
	}

	// actgate moments --json: the API's JSON, calls included.
	raw := g.cli("moments", "--json")
	wysArtifact(t, "wysiwys-actgate-moments.json", raw)
	var asJSON []wysMoment
	if err := json.Unmarshal([]byte(raw), &asJSON); err != nil {
		t.Fatalf("actgate moments --json: %v\n%s", err, raw)
	}
	if j := wysFind(t, asJSON, lieID); len(j.Calls) != 2 || !jsonSame(j.Calls[1].Args, wysArgs) || j.Calls[1].Tool != "send_payment" {
		t.Fatalf("actgate moments --json: option 2's call %+v", j.Calls)
	}
	if strings.Contains(raw, wysCard) {
		t.Fatal("actgate moments --json: the masked card number is shown")
	}

	// The web console in headless Chromium: each call inside its option, marked as actgate's.
	url := g.startConsole()
	ctx := consoletest.Browser(t)
	if err := consoletest.Load(ctx, url); err != nil {
		t.Fatal(err)
	}
	for _, m := range []wysMoment{lie, card} {
		r := consoletest.CheckInvariants(t, ctx, m.ID, consoletest.Expect{Envelope: m.env(t),
			Act:   console.Act{Tool: m.Tool, Server: m.Server, Class: m.Class, ActionDigest: m.ActionDigest},
			Calls: m.Calls, AgentAuthored: !m.GateAuthored})
		if m.ID == lieID {
			o := r.Options[1]
			if o.Label != wysLabel || o.LabelAuthor != "Agent's label:" || !strings.Contains(o.Runs.Args, "9999") || !strings.Contains(o.Runs.Args, "mallory-offshore-account") {
				t.Errorf("console: option 2 shows label %q (%q) and runs %+v", o.Label, o.LabelAuthor, o.Runs)
			}
		}
	}
	consoletest.Screenshot(t, ctx, "wysiwys-console")

	// Alice chooses the option she now sees in full: exactly that call runs, once.
	if out := g.cli("resolve", lieID, "--option", "2"); !strings.Contains(out, "RESOLVED") {
		t.Fatalf("resolve: %s", out)
	}
	if r := call(t, pay, "send_payment", wysArgs, "user"); r.IsError {
		t.Fatalf("the authorised call was refused: %s", text2(r))
	}
	if got := g.up.ran("send_payment"); !slices.Equal(got, []string{wysArgs}) {
		t.Fatalf("the upstream ran %q; want exactly the call alice saw, once", got)
	}

	// Masked, still bound: alice authorises the requested charge; a call with another card does
	// not run on it, the real one does.
	if out := g.cli("resolve", cardID, "--option", "1"); !strings.Contains(out, "RESOLVED") {
		t.Fatalf("resolve: %s", out)
	}
	other := strings.Replace(wysCardArg, wysCard, "5555555555554444", 1)
	if r := call(t, pay, "charge_card", other, "user"); !r.IsError || code(r) != string(ef.EFEscalationRequired) {
		t.Fatalf("a call with another value at the masked pointer: code %q %s", code(r), text2(r))
	}
	if r := call(t, pay, "charge_card", wysCardArg, "user"); r.IsError {
		t.Fatalf("the authorised masked call was refused: %s", text2(r))
	}
	canon, _ := jcs.Canonicalize([]byte(wysCardArg), jcs.Strict)
	if got := g.up.ran("charge_card"); !slices.Equal(got, []string{string(canon)}) {
		t.Fatalf("the upstream ran %q; want only the authorised card, once", got)
	}
}

func text2(r *mcp.CallToolResult) string { return text(r) }

// jsonSame reports whether raw is the JSON value of want.
func jsonSame(raw json.RawMessage, want string) bool {
	a, err := jcs.Canonicalize(raw, jcs.Strict)
	if err != nil {
		return false
	}
	b, err := jcs.Canonicalize([]byte(want), jcs.Strict)
	return err == nil && bytes.Equal(a, b)
}

// startConsole runs `actgate console` as alice on loopback and returns its URL.
func (g *wysGate) startConsole() string {
	g.t.Helper()
	cmd := exec.Command(g.bin, "console", "--config", g.cfgFile, "--as", "alice", "--address", "127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		g.t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		g.t.Fatal(err)
	}
	done := make(chan struct{})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		close(done)
	}()
	g.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	select {
	case l := <-lines:
		i := strings.Index(l, "http://")
		if i < 0 {
			g.t.Fatalf("actgate console printed %q", l)
		}
		return l[i:]
	case <-done:
		g.t.Fatal("actgate console exited")
	case <-time.After(30 * time.Second):
		g.t.Fatal("actgate console printed no URL")
	}
	return ""
}

// TestWYSIWYSKubectl is the Kubernetes surface of the same attack: a gate-authored
// BindingMoment (as the authority service writes it, spec.calls included) whose requested call
// pays 9999 to mallory. `kubectl actgate show`, run by the principal with her own kubeconfig and
// the principal role of config/rbac, shows 9999 and mallory-offshore-account inside option 1
// under "Runs (verified by actgate)". A BindingMoment whose spec.calls were swapped for a
// harmless-looking call (by anyone who may create BindingMoments) is discarded: no decision is
// shown and `kubectl actgate resolve --option` writes nothing.
func TestWYSIWYSKubectl(t *testing.T) {
	e := kube(t)
	ns := namespace(t, e, nil)
	pluginDir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(pluginDir, "kubectl-actgate"), "./cmd/kubectl-actgate")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/kubectl-actgate: %v\n%s", err, out)
	}
	alice, err := e.AddUser("alice-wys-" + ns + "@example.com")
	if err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "principal"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: principalRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: alice.Name}},
	}
	if err := e.Client.Create(kctx(t), rb); err != nil {
		t.Fatal(err)
	}

	const dest = "https://payments-mcp.payments.svc.cluster.local"
	capped := `{"amount":10,"to":"mallory-offshore-account"}`
	env, err := envelope.Build(envelope.Draft{
		Synopsis:        "Rule payments holds this send_payment call until a principal chooses which call may run.",
		Findings:        []string{"Tool send_payment on server payments (" + dest + ")."},
		Recommendations: []string{"Choose the requested call to let it run once as made.", "Choose an alternative to authorise that call instead."},
		Offer:           "Ask for detail on any item.",
		Stem:            "Which call of send_payment may run?",
		Options: []envelope.DraftOption{
			{Label: "Run send_payment as requested", Reasoning: "Authorises exactly the call the agent made, once.", Tool: "send_payment", Args: json.RawMessage(wysArgs)},
			{Label: "Pay at most 10", Reasoning: "Caps the amount while the rest is checked.", Tool: "send_payment", Args: json.RawMessage(capped)},
		},
		RecommendedIdx: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	create := func(name string, firstArgs string) *v1alpha1.BindingMoment {
		t.Helper()
		// The escalated Act, as the authority service records it.
		a := envtest.LoadSample[v1alpha1.Act](t, e.Root, "actgate_v1alpha1_act.yaml")
		a.Namespace, a.Name = ns, "pay-"+name
		o0, _ := env.Option(0)
		_, argsDigest, _ := jcs.CanonicalDigest([]byte(wysArgs), jcs.Strict)
		a.Spec.Tool, a.Spec.Server, a.Spec.Destination = "send_payment", "payments", dest
		a.Spec.ActionDigest, a.Spec.ArgumentsDigest = v1alpha1.Digest(o0.ActionDigest), v1alpha1.Digest(argsDigest)
		if err := e.Client.Create(kctx(t), a); err != nil {
			t.Fatalf("create Act: %v", err)
		}
		bm := &v1alpha1.BindingMoment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1alpha1.BindingMomentSpec{
				Envelope: string(env.Canonical()), EnvelopeDigest: v1alpha1.Digest(env.Digest()), Synopsis: env.Content().Synopsis,
				Principal: alice.Name, ActRef: v1alpha1.LocalObjectReference{Name: "pay-" + name},
				ExpiresAt: metav1.NewTime(time.Now().Add(time.Hour).Truncate(time.Second)),
				Calls: []v1alpha1.BindingMomentCall{
					{Server: "payments", Destination: dest, Tool: "send_payment", Args: firstArgs},
					{Server: "payments", Destination: dest, Tool: "send_payment", Args: capped},
				},
			},
		}
		if err := e.Client.Create(kctx(t), bm); err != nil {
			t.Fatalf("create BindingMoment: %v", err)
		}
		return bm
	}
	plugin := func(args ...string) (string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := e.Command(ctx, "kubectl", append([]string{"actgate"}, args...)...)
		for _, kv := range e.ToolEnv() {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "PATH":
				kv = "PATH=" + pluginDir + string(os.PathListSeparator) + v
			case "KUBECONFIG":
				kv = "KUBECONFIG=" + alice.Kubeconfig
			}
			cmd.Env = append(cmd.Env, kv)
		}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}

	create("pay-mallory", wysArgs)
	out, err := plugin("show", "pay-mallory", "-n", ns)
	if err != nil {
		t.Fatalf("kubectl actgate show: %v\n%s", err, out)
	}
	wysArtifact(t, "wysiwys-kubectl-actgate-show.txt", out)
	i := strings.Index(out, "[1] Run send_payment as requested")
	if i < 0 {
		t.Fatalf("option 1 not shown:\n%s", out)
	}
	block := out[i:]
	block = block[:strings.Index(block, "Authorises:")]
	for _, want := range []string{"Runs (verified by actgate): send_payment on server payments (" + dest + ")", "amount = 9999", `to = "mallory-offshore-account"`} {
		if !strings.Contains(block, want) {
			t.Errorf("kubectl actgate show: option 1's block lacks %q:\n%s", want, block)
		}
	}

	// The calls swapped for a harmless-looking one: they no longer hash to the option's digest.
	swapped := create("pay-swapped", `{"amount":10,"to":"bob"}`)
	out, err = plugin("show", "pay-swapped", "-n", ns)
	if err != nil || !strings.Contains(out, "BINDING MOMENT DISCARDED") || !strings.Contains(out, "BM_CALLS_MISMATCH") || strings.Contains(out, "--option") {
		t.Fatalf("kubectl actgate show of swapped calls (%v):\n%s", err, out)
	}
	if out, err := plugin("resolve", "pay-swapped", "-n", ns, "--option", "1"); err == nil {
		t.Fatalf("kubectl actgate resolve --option of swapped calls succeeded:\n%s", out)
	}
	got := &v1alpha1.BindingMoment{}
	if err := e.Client.Get(kctx(t), client.ObjectKeyFromObject(swapped), got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Resolution != nil {
		t.Fatalf("a resolution was written for a moment whose calls do not match: %+v", got.Spec.Resolution)
	}
}
