package approval

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

const testExternal = "https://approve.example.test:8443"

func newTestService(t testing.TB, mut func(*Options)) *Service {
	t.Helper()
	o := Options{ExternalURL: testExternal, Issuer: "https://127.0.0.1:1", ClientID: "actgate-approval",
		Kube: &rest.Config{Host: "https://127.0.0.1:2"}, Namespaces: []string{"payments"}, Timeout: time.Second}
	if mut != nil {
		mut(&o)
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestParseID(t *testing.T) {
	good := newID()
	if _, err := parseID(good); err != nil {
		t.Fatalf("parseID(%q): %v", good, err)
	}
	for _, bad := range []string{"", "x", good + "A", good[:42], strings.Repeat("=", 43), good[:42] + "=", good[:42] + "+",
		good[:42] + "/", good[:42] + "\x00", strings.Repeat("é", 21) + "a", " " + good[1:]} {
		if _, err := parseID(bad); !errors.Is(err, errBadID) {
			t.Errorf("parseID(%q) = %v, want errBadID", bad, err)
		}
	}
}

func TestParseMomentRef(t *testing.T) {
	for _, good := range []string{"payments/pay-1", "a/b", "payments", "bm-0123456789abcdef0123456789abcdef", "ns-1/bm.with.dots", strings.Repeat("a", 63) + "/" + strings.Repeat("b", 253)} {
		if _, _, err := parseMomentRef(good); err != nil {
			t.Errorf("parseMomentRef(%q): %v", good, err)
		}
	}
	for _, bad := range []string{"", "/pay", "payments/", "Payments/pay", "pay.ments/pay", "payments/pay/x",
		"payments/Pay", "payments/pay%2F", "payments/pay\n", "../x", "payments/-pay", strings.Repeat("a", 64) + "/b",
		"a/" + strings.Repeat("b", 254), "payments/pay#x", "payments/pay?x=1", "//evil.example/x", "payments/pay x"} {
		if _, _, err := parseMomentRef(bad); !errors.Is(err, errBadMoment) {
			t.Errorf("parseMomentRef(%q) = %v, want errBadMoment", bad, err)
		}
	}
}

func TestParseClasses(t *testing.T) {
	got, err := parseClasses([]string{"FINANCIAL", " PHYSICAL ", "", "NETWORK_CONTROL"})
	if err != nil || len(got) != 3 || !got["PHYSICAL"] {
		t.Fatalf("parseClasses = %v, %v", got, err)
	}
	for _, bad := range []string{"financial", "FIN ANCIAL", "FIN-1"} {
		if _, err := parseClasses([]string{bad}); err == nil {
			t.Errorf("parseClasses(%q) accepted", bad)
		}
	}
}

func TestAuthTimeOf(t *testing.T) {
	n := func(s string) *json.Number { j := json.Number(s); return &j }
	if at, err := authTimeOf(nil); err != nil || !at.IsZero() {
		t.Fatalf("absent auth_time: %v %v", at, err)
	}
	if at, err := authTimeOf(n("1765000000")); err != nil || at.Unix() != 1765000000 {
		t.Fatalf("auth_time: %v %v", at, err)
	}
	for _, bad := range []string{"0", "-5", "1e12", "x", "NaN"} {
		if _, err := authTimeOf(n(bad)); err == nil {
			t.Errorf("auth_time %q accepted", bad)
		}
	}
}

// TestSessionsBounded: the store holds at most its bound; at the bound a new session is
// refused with ErrTooManySessions unless an expired one can be dropped; an expired or removed
// session is never returned.
func TestSessionsBounded(t *testing.T) {
	now := time.Unix(1765000000, 0)
	st := newSessions(2)
	a, b := &session{expires: now.Add(time.Minute)}, &session{expires: now.Add(time.Hour)}
	if st.add(a, now) != nil || st.add(b, now) != nil {
		t.Fatal("add under the bound refused")
	}
	if err := st.add(&session{expires: now.Add(time.Hour)}, now); !errors.Is(err, ErrTooManySessions) {
		t.Fatalf("add at the bound: %v, want ErrTooManySessions", err)
	}
	if st.get(a.id, now) != a || st.get("not-an-id", now) != nil {
		t.Fatal("get")
	}
	later := now.Add(2 * time.Minute)
	if st.get(a.id, later) != nil {
		t.Fatal("an expired session was returned")
	}
	c := &session{expires: later.Add(time.Hour)}
	if err := st.add(c, later); err != nil {
		t.Fatalf("add after expiry freed a place: %v", err)
	}
	st.remove(b.id)
	if st.get(b.id, later) != nil || st.count() != 1 {
		t.Fatal("a removed session is still held")
	}
	if c.csrf == "" || c.csrf == c.id || !c.checkCSRF(c.csrf) || c.checkCSRF("") || c.checkCSRF(c.id) {
		t.Fatal("CSRF token")
	}
}

// TestLoginsBoundedSingleUse: a pending login is taken once, expires, and the store refuses
// at its bound.
func TestLoginsBoundedSingleUse(t *testing.T) {
	now := time.Unix(1765000000, 0)
	l := newLogins(1)
	p := &pending{expires: now.Add(time.Minute)}
	if err := l.add(p, now); err != nil {
		t.Fatal(err)
	}
	if p.state == p.nonce || p.state == p.verifier || len(p.verifier) < 43 {
		t.Fatalf("state, nonce and verifier are not distinct random values: %+v", p)
	}
	if err := l.add(&pending{expires: now.Add(time.Minute)}, now); !errors.Is(err, ErrTooManyLogins) {
		t.Fatalf("add at the bound: %v", err)
	}
	if l.take(p.state, now) != p || l.take(p.state, now) != nil {
		t.Fatal("a state was usable twice")
	}
	q := &pending{expires: now.Add(time.Minute)}
	if err := l.add(q, now); err != nil {
		t.Fatal(err)
	}
	if l.take(q.state, now.Add(time.Hour)) != nil {
		t.Fatal("an expired login was taken")
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	for name, mut := range map[string]func(*Options){
		"external with path":  func(o *Options) { o.ExternalURL = testExternal + "/approve" },
		"external not a URL":  func(o *Options) { o.ExternalURL = "approve.example" },
		"no issuer":           func(o *Options) { o.Issuer = "" },
		"no client":           func(o *Options) { o.ClientID = "" },
		"no namespaces":       func(o *Options) { o.Namespaces = nil },
		"bad namespace":       func(o *Options) { o.Namespaces = []string{"Pay/ments"} },
		"no API server":       func(o *Options) { o.Kube = &rest.Config{} },
		"bad step-up classes": func(o *Options) { o.StepUpClasses = []string{"financial"} },
	} {
		o := Options{ExternalURL: testExternal, Issuer: "https://127.0.0.1:1", ClientID: "c", Kube: &rest.Config{Host: "https://127.0.0.1:2"}, Namespaces: []string{"p"}}
		mut(&o)
		if _, err := New(o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestFrontDoor: what the service answers before anyone signs in. Another Host is refused;
// a POST from another origin, without an Origin, or from another site is refused before the
// session is even looked at; a POST without a session writes nothing; the landing page loads
// the sign-in script and carries the console's security headers; a deep link's moment that is
// not NAMESPACE/NAME is refused; a callback without the login cookie is refused.
func TestFrontDoor(t *testing.T) {
	s := newTestService(t, nil)
	do := func(method, target string, hdr map[string]string, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, target, strings.NewReader(body))
		req.Host = "approve.example.test:8443"
		for k, v := range hdr {
			if k == "Host" {
				req.Host = v
				continue
			}
			req.Header.Set(k, v)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		return rec
	}
	if rec := do("GET", "/", map[string]string{"Host": "evil.example"}, ""); rec.Code != http.StatusMisdirectedRequest {
		t.Errorf("another Host: %d", rec.Code)
	}
	if rec := do("GET", "/healthz", map[string]string{"Host": "10.0.0.7:8080"}, ""); rec.Code != http.StatusOK {
		t.Errorf("/healthz from a probe: %d", rec.Code)
	}
	rec := do("GET", "/", nil, "")
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `src="/static/approval.js"`) ||
		!strings.Contains(rec.Header().Get("Content-Security-Policy"), "frame-ancestors 'none'") || rec.Header().Get("Cache-Control") != "no-store" {
		t.Errorf("landing: %d %v\n%s", rec.Code, rec.Header(), rec.Body)
	}
	cookie := SessionCookie + "=" + newID()
	for name, hdr := range map[string]map[string]string{
		"no Origin":       {"Cookie": cookie},
		"another origin":  {"Cookie": cookie, "Origin": "https://evil.example"},
		"null origin":     {"Cookie": cookie, "Origin": "null"},
		"http origin":     {"Cookie": cookie, "Origin": "http://approve.example.test:8443"},
		"cross-site POST": {"Cookie": cookie, "Origin": testExternal, "Sec-Fetch-Site": "cross-site"},
	} {
		for _, path := range []string{"/resolve", "/signout"} {
			if rec := do("POST", path, hdr, "token=x&moment=payments/pay-1&choice=declined"); rec.Code != http.StatusForbidden {
				t.Errorf("%s POST %s: %d", name, path, rec.Code)
			}
		}
	}
	if rec := do("POST", "/resolve", map[string]string{"Cookie": cookie, "Origin": testExternal}, "choice=declined"); rec.Code != http.StatusUnauthorized ||
		!strings.Contains(rec.Body.String(), "nothing was written") {
		t.Errorf("POST with an unknown session: %d\n%s", rec.Code, rec.Body)
	}
	if rec := do("GET", "/resolve", nil, ""); rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET /resolve: %d", rec.Code)
	}
	for _, m := range []string{"../../x", "Payments", "https://evil.example/", "payments/pay\r\nSet-Cookie: x=y"} {
		if rec := do("GET", "/login?"+url.Values{"moment": {m}}.Encode(), nil, ""); rec.Code != http.StatusBadRequest {
			t.Errorf("login with moment %q: %d", m, rec.Code)
		}
	}
	if rec := do("GET", "/callback?state="+newID()+"&code=c", nil, ""); rec.Code != http.StatusBadRequest {
		t.Errorf("callback without the login cookie: %d", rec.Code)
	}
	state := newID()
	if rec := do("GET", "/callback?state="+state+"&code=c", map[string]string{"Cookie": LoginCookie + "=" + state}, ""); rec.Code != http.StatusBadRequest ||
		!strings.Contains(rec.Body.String(), "unknown or expired") {
		t.Errorf("callback with a state the service never issued: %d", rec.Code)
	}
	if rec := do("GET", "/login", nil, ""); rec.Code != http.StatusServiceUnavailable {
		t.Errorf("login with the provider unreachable: %d", rec.Code)
	}
	if n := s.Requests(); n < 10 {
		t.Errorf("Requests() = %d", n)
	}
}
