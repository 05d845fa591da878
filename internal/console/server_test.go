package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/actgate/actgate/internal/envelope"
)

func form(env *envelope.Envelope, id string, kv ...string) url.Values {
	f := url.Values{fieldToken: {testCSRF}, fieldMoment: {id}, fieldEnvelope: {env.Digest()}}
	for i := 0; i+1 < len(kv); i += 2 {
		f.Set(kv[i], kv[i+1])
	}
	return f
}

// TestResolveWritesEachKind: each of the four resolutions of envelope-04 §7.3 reaches the
// backend as exactly that resolution, naming the envelope shown, and the page says so.
func TestResolveWritesEachKind(t *testing.T) {
	env := built(t, envelope.Draft{})
	for _, tc := range []struct {
		choice, answer string
		want           string
	}{
		{"option:1", "", `{"binding_moment_resolution":{"envelope_digest":"%s","option_idx":1,"resolution":"option"}}`},
		{"answer", "Pay half now,\r\nthe rest on delivery.", `{"binding_moment_resolution":{"answer":"Pay half now,\nthe rest on delivery.","envelope_digest":"%s","resolution":"answer"}}`},
		{"question", "", `{"binding_moment_resolution":{"envelope_digest":"%s","resolution":"question"}}`},
		{"declined", "", `{"binding_moment_resolution":{"envelope_digest":"%s","resolution":"declined"}}`},
	} {
		t.Run(tc.choice, func(t *testing.T) {
			b := &fakeBackend{moments: []Moment{wellMoment("bm-1", env)}}
			f := form(env, "bm-1", fieldChoice, tc.choice)
			if tc.answer != "" {
				f.Set(fieldAnswer, tc.answer)
			}
			rec := post(t, newTestConsole(t, b), f, nil)
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			calls := b.calls()
			if len(calls) != 1 || calls[0].id != "bm-1" {
				t.Fatalf("backend calls %v", calls)
			}
			var got, want any
			_ = json.Unmarshal(calls[0].raw, &got)
			_ = json.Unmarshal([]byte(fmt.Sprintf(tc.want, env.Digest())), &want)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("backend got %s\nwant %s", calls[0].raw, fmt.Sprintf(tc.want, env.Digest()))
			}
			doc, _ := html.Parse(rec.Body)
			o := one(t, doc, "outcome", by("data-testid", "outcome"))
			if s, _ := attr(o, "data-outcome"); s != outcomeResolved {
				t.Errorf("outcome %q: %s", s, text(o))
			}
			if n := all(doc, by("data-moment-id", "bm-1")); len(n) != 0 {
				t.Errorf("the resolved moment is still listed")
			}
		})
	}
}

// TestResolveRefusedBeforeTheBackend: what the console refuses never reaches the backend.
func TestResolveRefusedBeforeTheBackend(t *testing.T) {
	env := built(t, envelope.Draft{})
	closed := built(t, envelope.Draft{CloseFreeText: true, CloseDialogue: true, Synopsis: "Another envelope."})
	other := built(t, envelope.Draft{Synopsis: "A third envelope."})
	bad := Moment{ID: "bm-bad", Problems: []envelope.Problem{{Code: "X", Path: "$", Message: "m"}}}
	for _, tc := range []struct {
		name   string
		form   url.Values
		hdr    map[string]string
		status int
		body   string
	}{
		{"no token", func() url.Values { f := form(env, "bm-1", fieldChoice, "declined"); f.Del(fieldToken); return f }(), nil, http.StatusForbidden, "token"},
		{"wrong token", form(env, "bm-1", fieldChoice, "declined", fieldToken, strings.Repeat("0", 32)), nil, http.StatusForbidden, "token"},
		{"two tokens", func() url.Values {
			f := form(env, "bm-1", fieldChoice, "declined")
			f.Add(fieldToken, testCSRF)
			return f
		}(), nil, http.StatusBadRequest, "repeats"},
		{"two choices", func() url.Values {
			f := form(env, "bm-1", fieldChoice, "declined")
			f.Add(fieldChoice, "option:0")
			return f
		}(), nil, http.StatusBadRequest, "repeats"},
		{"no origin", form(env, "bm-1", fieldChoice, "declined"), map[string]string{"Origin": ""}, http.StatusForbidden, "Origin"},
		{"foreign origin", form(env, "bm-1", fieldChoice, "declined"), map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden, "evil.example"},
		{"other port", form(env, "bm-1", fieldChoice, "declined"), map[string]string{"Origin": "http://127.0.0.1:9999"}, http.StatusForbidden, "origin"},
		{"cross-site fetch", form(env, "bm-1", fieldChoice, "declined"), map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden, "cross-site"},
		{"rebound host", form(env, "bm-1", fieldChoice, "declined"), map[string]string{"Host": "evil.example:8080", "Origin": "http://evil.example:8080"}, http.StatusMisdirectedRequest, "loopback"},
		{"no choice", form(env, "bm-1"), nil, http.StatusBadRequest, "no resolution chosen"},
		{"unknown choice", form(env, "bm-1", fieldChoice, "approve"), nil, http.StatusBadRequest, "no resolution chosen"},
		{"option out of range", form(env, "bm-1", fieldChoice, "option:2"), nil, http.StatusConflict, "RES_OPTION_IDX"},
		{"option not a number", form(env, "bm-1", fieldChoice, "option:x"), nil, http.StatusBadRequest, "no such option"},
		{"negative option", form(env, "bm-1", fieldChoice, "option:-1"), nil, http.StatusBadRequest, "no such option"},
		{"empty answer", form(env, "bm-1", fieldChoice, "answer", fieldAnswer, " \r\n "), nil, http.StatusBadRequest, "answer is empty"},
		{"control character in answer", form(env, "bm-1", fieldChoice, "answer", fieldAnswer, "ok\x1b[2J"), nil, http.StatusConflict, "RES_ANSWER"},
		{"another envelope", form(other, "bm-1", fieldChoice, "declined"), nil, http.StatusConflict, "another envelope"},
		{"unknown moment", form(env, "bm-9", fieldChoice, "declined"), nil, http.StatusConflict, "no longer pending"},
		{"malformed moment", url.Values{fieldToken: {testCSRF}, fieldMoment: {"bm-bad"}, fieldEnvelope: {env.Digest()}, fieldChoice: {"declined"}}, nil, http.StatusConflict, "malformed"},
		{"closed free-text hatch", form(closed, "bm-closed", fieldChoice, "answer", fieldAnswer, "x"), nil, http.StatusConflict, "hatch"},
		{"closed dialogue hatch", form(closed, "bm-closed", fieldChoice, "question"), nil, http.StatusConflict, "hatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &fakeBackend{moments: []Moment{wellMoment("bm-1", env), wellMoment("bm-closed", closed), bad}}
			rec := post(t, newTestConsole(t, b), tc.form, tc.hdr)
			if rec.Code != tc.status || !strings.Contains(rec.Body.String(), tc.body) {
				t.Fatalf("status %d, want %d with %q:\n%s", rec.Code, tc.status, tc.body, rec.Body)
			}
			if calls := b.calls(); len(calls) != 0 {
				t.Fatalf("the backend was asked to write %s", calls[0].raw)
			}
		})
	}
}

// TestResolveBackendRefusal: the backend's refusal (an admission denial) is shown in its own
// words as a refusal; any other error is an unknown outcome, never "resolved".
func TestResolveBackendRefusal(t *testing.T) {
	env := built(t, envelope.Draft{})
	const denial = `admission webhook "vbindingmoment.actgate.io" denied the request: only alice may resolve`
	for _, tc := range []struct {
		err     error
		outcome string
		status  int
	}{
		{fmt.Errorf("%w: %s", ErrRefused, denial), outcomeRefused, http.StatusConflict},
		{errors.New("connection reset by peer"), outcomeUnknown, http.StatusBadGateway},
	} {
		b := &fakeBackend{moments: []Moment{wellMoment("bm-1", env)}, refuse: tc.err}
		rec := post(t, newTestConsole(t, b), form(env, "bm-1", fieldChoice, "option:0"), nil)
		if rec.Code != tc.status {
			t.Errorf("%v: status %d", tc.err, rec.Code)
		}
		doc, _ := html.Parse(rec.Body)
		o := one(t, doc, "outcome", by("data-testid", "outcome"))
		if s, _ := attr(o, "data-outcome"); s != tc.outcome || !strings.Contains(text(o), tc.err.Error()[len(tc.err.Error())-20:]) {
			t.Errorf("%v: outcome %q %q", tc.err, s, text(o))
		}
		if n := all(doc, by("data-moment-id", "bm-1")); len(n) != 1 {
			t.Errorf("%v: the moment is no longer shown as pending", tc.err)
		}
	}
}

// TestRoutes: methods and paths other than the landing page, the page, the static files and
// the resolution POST are refused; every answer carries the security headers; the static files
// are served from the binary.
func TestRoutes(t *testing.T) {
	c := newTestConsole(t, &fakeBackend{})
	k := "/" + testToken
	for _, tc := range []struct {
		method, path, host string
		status             int
	}{
		{http.MethodGet, k + "/", "127.0.0.1:8080", http.StatusOK},
		{http.MethodGet, k + "/", "localhost:8080", http.StatusOK},
		{http.MethodGet, k + "/", "[::1]:8080", http.StatusOK},
		{http.MethodGet, k + "/", "attacker.example:8080", http.StatusMisdirectedRequest},
		{http.MethodGet, k + "/", "10.0.0.8:8080", http.StatusMisdirectedRequest},
		{http.MethodGet, "/", "127.0.0.1:8080", http.StatusOK}, // the keyless landing page
		{http.MethodPost, "/", "127.0.0.1:8080", http.StatusMethodNotAllowed},
		{http.MethodPost, k + "/", "127.0.0.1:8080", http.StatusMethodNotAllowed},
		{http.MethodGet, k + "/resolve", "127.0.0.1:8080", http.StatusMethodNotAllowed},
		{http.MethodGet, "/static/console.css", "127.0.0.1:8080", http.StatusOK},
		{http.MethodGet, "/static/console.js", "127.0.0.1:8080", http.StatusOK},
		{http.MethodGet, "/static/../server.go", "127.0.0.1:8080", http.StatusNotFound},
		{http.MethodGet, k + "/v1/moments", "127.0.0.1:8080", http.StatusNotFound},
	} {
		t.Run(tc.method+" "+tc.host+tc.path, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, "http://"+tc.host+tc.path, nil)
			req.Host = tc.host
			rec := httptest.NewRecorder()
			c.ServeHTTP(rec, req)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d", rec.Code, tc.status)
			}
			h := rec.Header()
			// (http.FileServer drops Cache-Control from its own error answers.)
			if !strings.Contains(h.Get("Content-Security-Policy"), "script-src 'self'") || h.Get("X-Frame-Options") != "DENY" ||
				(rec.Code == http.StatusOK && h.Get("Cache-Control") != "no-store") {
				t.Errorf("security headers missing: %v", h)
			}
			if len(rec.Result().Cookies()) != 0 {
				t.Errorf("a cookie was set: %v", rec.Result().Cookies())
			}
		})
	}
}

// TestListen: the console listens on loopback only.
func TestListen(t *testing.T) {
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:0", true},
		{"localhost:0", true},
		{"127.0.0.2:0", true},
		{"0.0.0.0:0", false},
		{":0", false},
		{"[::]:0", false},
		{"192.0.2.1:0", false},
		{"example.com:0", false},
		{"127.0.0.1", false},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			ln, err := Listen(tc.addr)
			if ln != nil {
				defer ln.Close()
				if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
					t.Fatalf("listening on %v", ln.Addr())
				}
			}
			if (err == nil) != tc.ok {
				t.Fatalf("Listen(%q) = %v, want ok=%v", tc.addr, err, tc.ok)
			}
			if !tc.ok && strings.Contains(tc.addr, ":0") && tc.addr != "127.0.0.1" && !errors.Is(err, ErrNotLoopback) {
				t.Errorf("error %v does not wrap ErrNotLoopback", err)
			}
		})
	}
}

// TestKey: without the console's key in the path nothing but the landing page and the static
// files is served; no answer ever sets a cookie (cookies reach every port of the host); the
// page's anti-CSRF token is not the key, and a POST needs both.
func TestKey(t *testing.T) {
	env := built(t, envelope.Draft{})
	b := &fakeBackend{moments: []Moment{wellMoment("bm-1", env)}}
	c := newTestConsole(t, b)
	do := func(method, target string, body url.Values) *httptest.ResponseRecorder {
		var req *http.Request
		if body != nil {
			req = httptest.NewRequest(method, target, strings.NewReader(body.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Origin", "http://127.0.0.1:8080")
		} else {
			req = httptest.NewRequest(method, target, nil)
		}
		// The old scheme's cookie and query key grant nothing.
		req.AddCookie(&http.Cookie{Name: "actgate_console_8080", Value: testToken})
		rec := httptest.NewRecorder()
		c.ServeHTTP(rec, req)
		if ck := rec.Result().Cookies(); len(ck) != 0 {
			t.Errorf("%s %s set a cookie: %v", method, target, ck)
		}
		return rec
	}
	keyAsCSRF := form(env, "bm-1", fieldChoice, "declined")
	keyAsCSRF.Set(fieldToken, testToken)
	for _, tc := range []struct {
		name, method, target string
		body                 url.Values
		status               int
	}{
		{"page without the key", http.MethodGet, "http://127.0.0.1:8080/" + strings.Repeat("f", 32) + "/", nil, http.StatusUnauthorized},
		{"page with the key in the query", http.MethodGet, "http://127.0.0.1:8080/x/?key=" + testToken, nil, http.StatusUnauthorized},
		{"page with a key prefix", http.MethodGet, "http://127.0.0.1:8080/" + testToken[:31] + "/", nil, http.StatusUnauthorized},
		{"page with the key and no slash", http.MethodGet, "http://127.0.0.1:8080/" + testToken, nil, http.StatusUnauthorized},
		{"POST without the key", http.MethodPost, "http://127.0.0.1:8080/resolve", form(env, "bm-1", fieldChoice, "declined"), http.StatusUnauthorized},
		{"POST with the key in the query", http.MethodPost, "http://127.0.0.1:8080/resolve?key=" + testToken, form(env, "bm-1", fieldChoice, "declined"), http.StatusUnauthorized},
		{"POST with the key as its CSRF token", http.MethodPost, keyed("/resolve"), keyAsCSRF, http.StatusForbidden},
		{"landing", http.MethodGet, "http://127.0.0.1:8080/", nil, http.StatusOK},
		{"static without the key", http.MethodGet, "http://127.0.0.1:8080/static/console.css", nil, http.StatusOK},
		{"page with the key", http.MethodGet, keyed("/"), nil, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if rec := do(tc.method, tc.target, tc.body); rec.Code != tc.status {
				t.Fatalf("status %d, want %d", rec.Code, tc.status)
			}
		})
	}
	if calls := b.calls(); len(calls) != 0 {
		t.Fatalf("an unauthorized POST reached the backend: %s", calls[0].raw)
	}
	if rec := do(http.MethodGet, "http://127.0.0.1:8080/", nil); strings.Contains(rec.Body.String(), testToken) {
		t.Fatal("the landing page shows the key")
	}
	rec := do(http.MethodGet, keyed("/"), nil)
	if strings.Contains(rec.Body.String(), `value="`+testToken) {
		t.Fatal("the page embeds the key as a form value")
	}
	if !strings.Contains(rec.Body.String(), testCSRF) {
		t.Fatal("the page does not carry its CSRF token")
	}
	c2 := newTestConsole(t, b)
	c2.csrfKey = []byte("another console's csrf key 32byt")
	if c2.checkCSRF(testCSRF) {
		t.Fatal("a token signed by another console's key was accepted")
	}
}
