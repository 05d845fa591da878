package approval_test

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-logr/logr/testr"
	"golang.org/x/oauth2"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	v1alpha1 "github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/approval"
	"github.com/actgate/actgate/internal/console"
	"github.com/actgate/actgate/internal/console/consoletest"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/kubectlplugin"
	"github.com/actgate/actgate/test/envtest"
	"github.com/actgate/actgate/test/testutil"
	"github.com/actgate/actgate/test/testutil/idp"
	"github.com/actgate/actgate/test/testutil/payment"
	"github.com/actgate/actgate/test/testutil/webhookenv"
)

const (
	// catcherURI is a redirect URI of the service's client that only the test uses
	// (providerToken); nothing listens there.
	catcherURI   = "https://127.0.0.1:9/test-token"
	clientID     = "actgate-approval"
	clientSecret = "approval-client-secret"
	stepUpAge    = 5 * time.Minute
)

// rig is the approval service on loopback TLS in front of a kube-apiserver that trusts the
// provider, with the BindingMoment webhook.
type rig struct {
	env      *webhookenv.Env
	p        *idp.Provider
	svc      *approval.Service
	external string
	ns       string
	// offset moves the service's clock (sessions, step-up) ahead of the real one.
	offset atomic.Int64
	pool   *x509.CertPool
	// spki are the SPKI hashes of the service's and the provider's TLS certificates, which the
	// browser trusts (and nothing else).
	spki []string
}

func startRig(t *testing.T) *rig {
	t.Helper()
	addr := testutil.FreeAddr(t)
	r := &rig{external: "https://" + addr}
	r.p = idp.Start(t, idp.Options{Clients: []idp.Client{{ID: clientID, Secret: clientSecret, RedirectURIs: []string{r.external + "/callback", catcherURI}}}})
	authn := r.p.WriteAuthenticationConfig(t, t.TempDir(), clientID)
	r.env = webhookenv.Start(t, nil, envtest.WithAPIServerFlag("authentication-config", authn))
	r.ns = r.env.Namespace(t)
	payment.GrantPrincipals(t, r.env.Env, r.ns, alice, bob)

	pki := testutil.NewPKI(t, t.TempDir())
	r.pool = x509.NewCertPool()
	r.pool.AppendCertsFromPEM(pki.CAPEM)
	r.pool.AppendCertsFromPEM(r.p.CAPEM())
	idpPool := x509.NewCertPool()
	idpPool.AppendCertsFromPEM(r.p.CAPEM())
	issuerClient := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: idpPool, MinVersion: tls.VersionTLS12}}}
	svc, err := approval.New(approval.Options{
		ExternalURL: r.external, Issuer: r.p.Issuer(), ClientID: clientID, ClientSecret: clientSecret, IssuerClient: issuerClient,
		Kube: r.env.Env.Config, Namespaces: []string{r.ns}, StepUpMaxAge: stepUpAge,
		Now: func() time.Time { return time.Now().Add(time.Duration(r.offset.Load())) }, Log: testr.New(t),
	})
	must(t, err)
	r.svc = svc
	ln, err := net.Listen("tcp", addr)
	must(t, err)
	srv := &http.Server{Handler: svc, TLSConfig: &tls.Config{Certificates: []tls.Certificate{pki.Cert}, MinVersion: tls.VersionTLS12}, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })

	leaf, err := x509.ParseCertificate(pki.Cert.Certificate[0])
	must(t, err)
	r.spki = append(r.spki, spkiHash(leaf))
	u, _ := url.Parse(r.p.Issuer())
	conn, err := tls.Dial("tcp", u.Host, &tls.Config{RootCAs: idpPool, MinVersion: tls.VersionTLS12})
	must(t, err)
	r.spki = append(r.spki, spkiHash(conn.ConnectionState().PeerCertificates[0]))
	_ = conn.Close()
	return r
}

func spkiHash(c *x509.Certificate) string {
	h := sha256.Sum256(c.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(h[:])
}

// client is a browser of the test's own (cookie jar, both CAs trusted) for the requests a
// page would not send.
func (r *rig) client(follow bool) *http.Client {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: r.pool, MinVersion: tls.VersionTLS12}}}
	if !follow {
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	return c
}

// signIn signs u in at the service with c (which follows redirects) through the provider's
// login form. The API server reads the provider's keys some time after it starts, and until
// then the service refuses the sign-in (the API server does not accept the token): signIn
// tries again until it is accepted.
func (r *rig) signIn(t *testing.T, c *http.Client, u idp.User) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		resp := r.p.SignIn(t, c, r.external+"/login", u.Login, u.Password)
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK && strings.Contains(string(body), `data-kind="signed-in"`) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("signing %s in: %d %s", u.Login, resp.StatusCode, body)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

var tokenRE = regexp.MustCompile(`name="token" value="([A-Za-z0-9_-]+)"`)

// page GETs the moment page with c and returns its body and its anti-CSRF token.
func (r *rig) page(t *testing.T, c *http.Client) (string, string) {
	t.Helper()
	resp, err := c.Get(r.external + "/")
	must(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := tokenRE.FindStringSubmatch(string(b))
	if m == nil {
		return string(b), ""
	}
	return string(b), m[1]
}

// post sends a resolution form with c from origin.
func (r *rig) post(t *testing.T, c *http.Client, path, origin string, form url.Values, cookie string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, r.external+path, strings.NewReader(form.Encode()))
	must(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", origin)
	if cookie != "" {
		req.Header.Set("Cookie", cookie)
	}
	resp, err := c.Do(req)
	must(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp
}

func unresolved(t *testing.T, r *rig, name, why string) {
	t.Helper()
	if bm := payment.Get(t, r.env.Env, r.ns, name); bm.Spec.Resolution != nil {
		t.Fatalf("%s: %s/%s was resolved: %+v", why, r.ns, name, bm.Spec.Resolution)
	}
}

// TestApprovalServiceInChromium: the cluster's announcer (controllers.BindingMomentAnnouncer,
// its link the approval service's URL) announces the pending moment to a loopback Slack-format
// webhook receiver and, over STARTTLS, to a loopback SMTP server, both of the test's own: one mail
// to alice@example.com and one webhook body, carrying the same deep link and neither an option's
// label nor an argument value (envelope-04 §8.4). alice opens the link from her decoded mail in
// headless Chromium, signs in at the provider's login page, lands on that very moment, sees the exact call under "Runs (verified by actgate)" with every envelope-04 §9.1
// invariant, and chooses an option: the BindingMoment then holds exactly that resolution, with
// via naming the approval service and alice's issuer, subject and auth_time, admitted by the
// webhook that admits only the principal. The wall time from opening the link to the outcome
// and the requests the service answered for it are logged. Desktop and 390 px phone
// screenshots of the moment page are saved; on the phone the page does not scroll sideways.
func TestApprovalServiceInChromium(t *testing.T) {
	r := startRig(t)
	announced, stopAnnouncer := startAnnouncer(t, r)
	names := []string{"pay-deeplink", "pay-shown"}
	envs := map[string]*envelope.Envelope{}
	acts := map[string]*v1alpha1.Act{}
	for _, n := range names {
		envs[n] = payment.Envelope(t, n, "approval service test")
		acts[n] = payment.Create(t, r.env.Env, r.ns, n, alice, v1alpha1.ConsequenceFinancial, envs[n])
	}
	// The API server must trust the provider before the browser signs in (signIn waits).
	r.signIn(t, r.client(true), idp.Alice)

	// The announcer mailed alice and posted to the channel; the link alice opens is the one in
	// her mail, and the channel's message carries the same one. Neither carries an option's
	// label or an argument value of the calls (the synopsis, the envelope's own slot, aside).
	id := r.ns + "/pay-deeplink"
	d := announced.wait(t, id, 60*time.Second)
	stopAnnouncer()
	if d.mails != 1 || d.hooks != 1 || len(d.mailTo) != 1 || d.mailTo[0] != "alice@example.com" || !d.mailTLS {
		t.Fatalf("moment %s announced by %d mails (to %v, TLS %v) and %d webhook bodies, want one each to alice@example.com over TLS",
			id, d.mails, d.mailTo, d.mailTLS, d.hooks)
	}
	if want := r.external + "/#moment-" + id; d.link != want {
		t.Fatalf("the mail links to %q, want the approval service's moment page %q", d.link, want)
	}
	if !slices.Contains(d.hookStrings, d.link) {
		t.Errorf("the webhook body does not carry the mail's link %s: %q", d.link, d.hookStrings)
	}
	synopsis := envs["pay-deeplink"].Content().Synopsis
	for _, secret := range undisclosed(t, envs["pay-deeplink"], payment.Calls(t)) {
		if strings.Contains(strings.ReplaceAll(d.mailText, synopsis, ""), secret) {
			t.Errorf("the mail carries %q:\n%s", secret, d.mailText)
		}
		for _, s := range d.hookStrings {
			if strings.Contains(strings.ReplaceAll(s, synopsis, ""), secret) {
				t.Errorf("the webhook body carries %q in %q", secret, s)
			}
		}
	}

	ctx := consoletest.BrowserWith(t, chromedp.Flag("ignore-certificate-errors-spki-list", strings.Join(r.spki, ",")))
	start, before := time.Now(), r.svc.Requests()
	must(t, chromedp.Do(ctx, chromedp.Navigate(d.link), chromedp.WaitVisible(chromedp.CSS("#sign-in"))))
	must(t, chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(`input[name="login"]`), idp.Alice.Login),
		chromedp.SendKeys(chromedp.CSS(`input[name="password"]`), idp.Alice.Password),
		chromedp.Click(chromedp.CSS("#sign-in"))))
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	err := chromedp.Do(wctx, chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`section[data-moment-id=%q]`, id))))
	cancel()
	if err != nil {
		where, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + " — " + document.body.innerText.slice(0, 400)`))
		t.Fatalf("the moment is not shown after signing in (%v); the browser shows %q", err, where)
	}
	hash, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.hash`))
	must(t, err)
	if hash != "#moment-"+id {
		t.Errorf("after signing in the browser is at %q, not the deep link's moment", hash)
	}
	s := acts["pay-deeplink"].Spec
	consoletest.CheckInvariants(t, ctx, id, consoletest.Expect{Envelope: envs["pay-deeplink"], Calls: payment.Calls(t),
		Act: console.Act{Tool: s.Tool, Server: s.Server, Class: string(s.ConsequenceClass), ActionDigest: string(s.ActionDigest)}})
	o, err := consoletest.Choose(ctx, id, 1)
	must(t, err)
	elapsed, requests := time.Since(start), r.svc.Requests()-before
	if o.Status != "resolved" || !strings.Contains(o.Message, "bindingmoment.actgate.io/pay-deeplink resolved by "+alice) {
		t.Fatalf("outcome %+v", o)
	}
	t.Logf("sign-in to resolution: %s wall time in Chromium, %d HTTP requests answered by the approval service "+
		"(deep link, landing script, login, callback, moment page and its static files, the resolution POST)", elapsed.Round(time.Millisecond), requests)

	bm := payment.Get(t, r.env.Env, r.ns, "pay-deeplink")
	got := bm.Spec.Resolution
	if got == nil || got.Kind != v1alpha1.ResolutionOption || got.OptionIdx == nil || *got.OptionIdx != 1 ||
		got.EnvelopeDigest != v1alpha1.Digest(envs["pay-deeplink"].Digest()) {
		t.Fatalf("stored resolution %+v", got)
	}
	if v := got.Via; v == nil || v.Surface != approval.Surface || v.Issuer != r.p.Issuer() || v.Subject == "" || v.AuthTime == nil ||
		time.Since(v.AuthTime.Time) > 5*time.Minute {
		t.Fatalf("stored via %+v", got.Via)
	}

	// The page of the moment left, on a desktop and on a 390 px phone.
	must(t, consoletest.Load(ctx, r.external+"/#moment-"+r.ns+"/pay-shown"))
	consoletest.Screenshot(t, ctx, "approval-service-desktop")
	must(t, chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile)))
	must(t, consoletest.Load(ctx, r.external+"/"))
	wide, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](`[document.documentElement.scrollWidth, document.documentElement.clientWidth,
		Math.max(...[...document.querySelectorAll("button")].map(b => b.getBoundingClientRect().right))]`))
	must(t, err)
	if wide[0] > wide[1] || wide[2] > wide[1] {
		t.Errorf("at 390 px the page scrolls sideways or a button is off screen: scrollWidth %d, width %d, rightmost button %d", wide[0], wide[1], wide[2])
	}
	consoletest.CheckInvariants(t, ctx, r.ns+"/pay-shown", consoletest.Expect{Envelope: envs["pay-shown"], Calls: payment.Calls(t),
		Act: console.Act{Tool: s.Tool, Server: s.Server, Class: string(s.ConsequenceClass), ActionDigest: string(acts["pay-shown"].Spec.ActionDigest)}})
	consoletest.Screenshot(t, ctx, "approval-service-phone")
}

// TestApprovalServiceRefusals: what a signed-in person or a stolen cookie cannot do. bob,
// signed in, sees none of alice's moments, and his forged POST of alice's moment (his own
// session and token) is refused and stores nothing; bob's own ID token sent straight to the API
// server is refused by the webhook. alice's session POSTing from another origin stores
// nothing. A FINANCIAL moment with an authentication older than the step-up age sends alice
// back to sign in with max_age and the moment kept, and stores nothing. After sign-out, the
// copied session cookie does nothing. The service's own ServiceAccount token cannot resolve:
// RBAC refuses it, and with the principal role bound to it the webhook refuses it.
func TestApprovalServiceRefusals(t *testing.T) {
	r := startRig(t)
	for _, n := range []string{"pay-forged", "pay-origin", "pay-stepup", "pay-replay", "pay-sa"} {
		payment.Create(t, r.env.Env, r.ns, n, alice, v1alpha1.ConsequenceFinancial, payment.Envelope(t, n, "approval service test"))
	}
	digest := func(name string) string { return string(payment.Get(t, r.env.Env, r.ns, name).Spec.EnvelopeDigest) }
	form := func(token, name string) url.Values {
		return url.Values{"token": {token}, "moment": {r.ns + "/" + name}, "envelope": {digest(name)}, "choice": {"option:0"}}
	}

	// bob sees nothing of alice's, and cannot resolve it through the service.
	bobC := r.client(true)
	r.signIn(t, bobC, idp.Bob)
	body, bobToken := r.page(t, bobC)
	if bobToken == "" || !strings.Contains(body, `data-testid="empty"`) || strings.Contains(body, "pay-") || !strings.Contains(body, "Resolving as <strong>"+bob) {
		t.Fatalf("bob's page:\n%s", body)
	}
	if resp := r.post(t, bobC, "/resolve", r.external, form(bobToken, "pay-forged"), ""); resp.StatusCode != http.StatusConflict {
		t.Errorf("bob's forged POST of alice's moment: %d", resp.StatusCode)
	}
	unresolved(t, r, "pay-forged", "bob's forged POST")

	// bob's own ID token straight to the API server: the webhook refuses him.
	bobToken2 := providerToken(t, r, idp.Bob)
	_, err := resolveWith(t, r, bobToken2, "pay-forged")
	if !errors.Is(err, kubectlplugin.ErrRefusedByServer) || !strings.Contains(err.Error(), bob+" is not "+alice) {
		t.Fatalf("bob's own token resolving alice's moment: %v", err)
	}
	unresolved(t, r, "pay-forged", "bob's own token")

	// alice, signed in, POSTing from another origin: refused before anything is read.
	aliceC := r.client(true)
	r.signIn(t, aliceC, idp.Alice)
	_, aliceToken := r.page(t, aliceC)
	if resp := r.post(t, aliceC, "/resolve", "https://evil.example", form(aliceToken, "pay-origin"), ""); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a POST from another origin: %d", resp.StatusCode)
	}
	unresolved(t, r, "pay-origin", "a POST from another origin")

	// Step-up: six minutes later by the service's clock, alice's authentication is older than
	// the step-up age; resolving the FINANCIAL moment sends her to sign in with max_age, coming
	// back to the moment. Nothing is stored.
	r.offset.Store(int64(6 * time.Minute))
	noFollow := &http.Client{Jar: aliceC.Jar, Transport: aliceC.Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp := r.post(t, noFollow, "/resolve", r.external, form(aliceToken, "pay-stepup"), "")
	loc, want := resp.Header.Get("Location"), "/login?"+url.Values{"moment": {r.ns + "/pay-stepup"}, "stepup": {"1"}}.Encode()
	if resp.StatusCode != http.StatusSeeOther || loc != want {
		t.Fatalf("a stale authentication on a FINANCIAL moment: %d %q", resp.StatusCode, loc)
	}
	unresolved(t, r, "pay-stepup", "a stale authentication")
	resp, err = noFollow.Get(r.external + loc)
	must(t, err)
	_ = resp.Body.Close()
	authURL, err := url.Parse(resp.Header.Get("Location"))
	must(t, err)
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(authURL.String(), r.p.Issuer()) ||
		authURL.Query().Get("max_age") != fmt.Sprint(int(stepUpAge/time.Second)) || authURL.Query().Get("code_challenge_method") != "S256" {
		t.Fatalf("the step-up sign-in goes to %d %s", resp.StatusCode, authURL)
	}
	// Back on the real clock, the fresh sign-in brings alice back to the moment, and resolves.
	r.offset.Store(0)
	resp = r.p.SignIn(t, aliceC, authURL.String(), idp.Alice.Login, idp.Alice.Password)
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if !strings.Contains(string(b), `url=/#moment-`+r.ns+`/pay-stepup"`) {
		t.Fatalf("after the step-up sign-in: %d %s", resp.StatusCode, b)
	}
	_, aliceToken = r.page(t, aliceC)
	if resp := r.post(t, aliceC, "/resolve", r.external, form(aliceToken, "pay-stepup"), ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("resolving after the step-up: %d", resp.StatusCode)
	}
	if bm := payment.Get(t, r.env.Env, r.ns, "pay-stepup"); bm.Spec.Resolution == nil || bm.Spec.Resolution.Via == nil || bm.Spec.Resolution.Via.Subject == "" {
		t.Fatalf("after the step-up: %+v", bm.Spec.Resolution)
	}

	// Sign-out ends the session on the server: the copied cookie and token do nothing after.
	u, _ := url.Parse(r.external)
	var cookie string
	for _, c := range aliceC.Jar.Cookies(u) {
		if c.Name == approval.SessionCookie {
			cookie = c.Name + "=" + c.Value
		}
	}
	if cookie == "" {
		t.Fatal("no session cookie")
	}
	sessions := r.svc.Sessions()
	if resp := r.post(t, aliceC, "/signout", r.external, url.Values{"token": {aliceToken}}, ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("sign-out: %d", resp.StatusCode)
	}
	if r.svc.Sessions() != sessions-1 {
		t.Errorf("sign-out left %d sessions of %d", r.svc.Sessions(), sessions)
	}
	replay := r.client(false)
	if resp := r.post(t, replay, "/resolve", r.external, form(aliceToken, "pay-replay"), cookie); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the session cookie replayed after sign-out: %d", resp.StatusCode)
	}
	unresolved(t, r, "pay-replay", "a cookie replayed after sign-out")

	// The service's own ServiceAccount token.
	saToken := serviceAccountToken(t, r, "actgate-approval")
	if _, err := resolveWith(t, r, saToken, "pay-sa"); !errors.Is(err, kubectlplugin.ErrRefusedByServer) || !strings.Contains(err.Error(), "forbidden") {
		t.Fatalf("the service's own token (no RBAC): %v", err)
	}
	bindPrincipal(t, r, "approval-sa-principal", "system:serviceaccount:"+r.ns+":actgate-approval")
	// The API server's authorizer sees a new RoleBinding a moment after it is created.
	testutil.Eventually(t, 30*time.Second, "the principal role to reach the API server's authorizer", func() error {
		if _, err = resolveWith(t, r, saToken, "pay-sa"); err != nil && strings.Contains(err.Error(), "cannot get resource") {
			return err
		}
		return nil
	})
	if !errors.Is(err, kubectlplugin.ErrRefusedByServer) || !strings.Contains(err.Error(), "is not "+alice) {
		t.Fatalf("the service's own token with the principal role: %v", err)
	}
	unresolved(t, r, "pay-sa", "the service's ServiceAccount token")
}

// resolveWith writes a decline of moment name with bearer token, as kubectl-actgate would.
func resolveWith(t *testing.T, r *rig, token, name string) (*v1alpha1.BindingMoment, error) {
	t.Helper()
	cfg := rest.AnonymousClientConfig(r.env.Env.Config)
	cfg.BearerToken = token
	c, err := kubectlplugin.NewClient(cfg)
	must(t, err)
	bm, err := c.GetMoment(t.Context(), r.ns, name)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", kubectlplugin.ErrRefusedByServer, err)
	}
	return c.Resolve(t.Context(), bm, &v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionDeclined, EnvelopeDigest: bm.Spec.EnvelopeDigest})
}

// serviceAccountToken creates ServiceAccount name in the test's namespace and returns a token
// of it (TokenRequest), as the service's pod would hold.
func serviceAccountToken(t *testing.T, r *rig, name string) string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(r.env.Env.Config)
	must(t, err)
	_, err = cs.CoreV1().ServiceAccounts(r.ns).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	must(t, err)
	tr, err := cs.CoreV1().ServiceAccounts(r.ns).CreateToken(t.Context(), name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	must(t, err)
	return tr.Status.Token
}

// providerToken signs u in at the provider as the service's client, but with the test's own
// redirect URI (catcherURI, which nothing serves: the redirect is read, not followed), and
// redeems the code for the ID token: a token the API server accepts, held by the test.
func providerToken(t *testing.T, r *rig, u idp.User) string {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(r.p.CAPEM())
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	ctx := oidc.ClientContext(t.Context(), hc)
	prov, err := oidc.NewProvider(ctx, r.p.Issuer())
	must(t, err)
	conf := &oauth2.Config{ClientID: clientID, ClientSecret: clientSecret, Endpoint: prov.Endpoint(), RedirectURL: catcherURI, Scopes: []string{oidc.ScopeOpenID, "email"}}
	verifier := oauth2.GenerateVerifier()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Transport: hc.Transport, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), catcherURI) {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	resp := r.p.SignIn(t, c, conf.AuthCodeURL("state-of-the-test", oauth2.S256ChallengeOption(verifier), oidc.Nonce("nonce-of-the-test")), u.Login, u.Password)
	_ = resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || loc.Query().Get("code") == "" {
		t.Fatalf("the provider did not redirect with a code: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	tok, err := conf.Exchange(ctx, loc.Query().Get("code"), oauth2.VerifierOption(verifier))
	must(t, err)
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		t.Fatal("no ID token")
	}
	return raw
}

// bindPrincipal binds the principal ClusterRole (config/rbac) to user in the test's namespace
// under its own RoleBinding name.
func bindPrincipal(t *testing.T, r *rig, name, user string) {
	t.Helper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "actgate-bindingmoment-principal-role"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	must(t, r.env.Client.Create(t.Context(), rb))
}
