package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/go-logr/logr"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/action"
	"github.com/actgate/actgate/internal/console"
	"github.com/actgate/actgate/internal/console/consoletest"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/gateconfig"
	"github.com/actgate/actgate/internal/jcs"
	"github.com/actgate/actgate/test/testutil"
	"github.com/actgate/actgate/test/testutil/idp"
)

// TestServeApprovalInChromium: a standalone gate with an approval section serves the moment
// page over TLS to principals who sign in at the OpenID provider fixture. A payment escalates
// to alice; in headless Chromium alice opens the moment's deep link, signs in (her
// preferred_username claim names the gate's principal alice), lands on the moment, sees the
// exact call and chooses the option that runs it: the gate issues authority for exactly that
// call, and the agent's call then runs once upstream.
func TestServeApprovalInChromium(t *testing.T) {
	g := startTestGate(t)
	cs := g.agent()
	args := `{"amount":250,"to":"bob"}`
	id := escalate(t, cs, args)

	addr := testutil.FreeAddr(t)
	external := "https://" + addr
	pki := testutil.NewPKI(t, t.TempDir())
	p := idp.Start(t, idp.Options{Clients: []idp.Client{{ID: "actgate-gate", Secret: "gate-secret", RedirectURIs: []string{external + "/callback"}}}})
	g.cfg.Approval = &gateconfig.Approval{Listen: addr, ExternalURL: external, Issuer: p.Issuer(), ClientID: "actgate-gate",
		ClientSecretFile: testutil.WriteFile(t, t.TempDir(), "secret", []byte("gate-secret\n")), CAFile: p.CAFile(),
		PrincipalClaim: "preferred_username", TLSCertFile: pki.CertFile, TLSKeyFile: pki.KeyFile}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	svc, err := startApproval(ctx, g.cfg, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Ready(ctx); err != nil {
		t.Fatal(err)
	}

	spki := func(c *x509.Certificate) string {
		h := sha256.Sum256(c.RawSubjectPublicKeyInfo)
		return base64.StdEncoding.EncodeToString(h[:])
	}
	leaf, err := x509.ParseCertificate(pki.Cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(p.Issuer())
	conn, err := tls.Dial("tcp", u.Host, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reads the provider's certificate, to trust only it
	if err != nil {
		t.Fatal(err)
	}
	idpLeaf := conn.ConnectionState().PeerCertificates[0]
	_ = conn.Close()
	bctx := consoletest.BrowserWith(t, chromedp.Flag("ignore-certificate-errors-spki-list", spki(leaf)+","+spki(idpLeaf)))

	if err := chromedp.Do(bctx, chromedp.Navigate(external+"/#moment-"+id), chromedp.WaitVisible(chromedp.CSS("#sign-in")),
		chromedp.SendKeys(chromedp.CSS(`input[name="login"]`), idp.Alice.Login),
		chromedp.SendKeys(chromedp.CSS(`input[name="password"]`), idp.Alice.Password),
		chromedp.Click(chromedp.CSS("#sign-in"))); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(bctx, 60*time.Second)
	err = chromedp.Do(wctx, chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`section[data-moment-id=%q]`, id))))
	wcancel()
	if err != nil {
		where, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`location.href + " — " + document.body.innerText.slice(0, 400)`))
		t.Fatalf("the moment is not shown after signing in (%v); the browser shows %q", err, where)
	}
	if hash, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`location.hash`)); hash != "#moment-"+id {
		t.Errorf("after signing in the browser is at %q", hash)
	}
	api, err := (&apiFlags{dataDir: g.cfg.DataDir, as: "alice"}).client()
	if err != nil {
		t.Fatal(err)
	}
	ms, err := api.Moments(context.Background(), false)
	if err != nil || len(ms) != 1 {
		t.Fatalf("moments: %v %v", ms, err)
	}
	env, err := envelope.Parse(ms[0].Envelope)
	if err != nil {
		t.Fatal(err)
	}
	digest, err := action.Digest("send_payment", json.RawMessage(args), jcs.Strict)
	if err != nil {
		t.Fatal(err)
	}
	consoletest.CheckInvariants(t, bctx, id, consoletest.Expect{Envelope: env, Calls: ms[0].Calls, AgentAuthored: !ms[0].GateAuthored,
		Act: console.Act{Tool: "send_payment", Server: "finance", Class: "FINANCIAL", ActionDigest: digest}})
	opt := -1
	for j := range env.NumOptions() {
		if o, _ := env.Option(j); o.ActionDigest == digest {
			opt = j
		}
	}
	o, err := consoletest.Choose(bctx, id, opt)
	if err != nil {
		t.Fatal(err)
	}
	if o.Status != "resolved" || !strings.Contains(o.Message, id+" resolved by alice") || !strings.Contains(o.Message, "authority authz-") {
		t.Fatalf("outcome %+v", o)
	}
	if n := g.up.Count("send_payment"); n != 0 {
		t.Fatalf("the upstream ran %d times before the agent's call", n)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "send_payment", Arguments: json.RawMessage(args)})
	if err != nil || res.IsError {
		t.Fatalf("the agent's call after the resolution: %v %+v", err, res)
	}
	if n := g.up.Count("send_payment"); n != 1 {
		t.Fatalf("the upstream ran %d times, want once", n)
	}
}
