package console

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/actgate/actgate/internal/envelope"
)

// FuzzResolveForm posts arbitrary form bodies to the console. It must never panic, and the
// backend may only ever receive a well-formed §7.3 resolution of the envelope on the page,
// through a hatch that envelope leaves open.
func FuzzResolveForm(f *testing.F) {
	env := built(f, envelope.Draft{CloseDialogue: true})
	for _, seed := range []string{
		form(env, "bm-1", fieldChoice, "option:0").Encode(),
		form(env, "bm-1", fieldChoice, "option:1").Encode(),
		form(env, "bm-1", fieldChoice, "answer", fieldAnswer, "Pay half now.").Encode(),
		form(env, "bm-1", fieldChoice, "question").Encode(),
		form(env, "bm-1", fieldChoice, "declined").Encode(),
		form(env, "bm-1", fieldChoice, "option:9").Encode(),
		form(env, "bm-1", fieldChoice, "answer", fieldAnswer, "\x00\u202e").Encode(),
		"token=" + testCSRF + "&token=" + testCSRF,
		"token=" + testToken,
		"%zz=1&choice=declined",
		"",
		strings.Repeat("a=b&", 1000),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		b := &fakeBackend{moments: []Moment{wellMoment("bm-1", env)}}
		c := newTestConsole(t, b)
		req := httptest.NewRequest(http.MethodPost, keyed("/resolve"), strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "http://127.0.0.1:8080")
		rec := httptest.NewRecorder()
		c.ServeHTTP(rec, req)
		calls := b.calls()
		if len(calls) == 0 {
			if rec.Code == http.StatusOK {
				t.Fatalf("status 200 without a resolution written")
			}
			return
		}
		if len(calls) > 1 || calls[0].id != "bm-1" {
			t.Fatalf("backend calls %v", calls)
		}
		r, err := envelope.ParseResolution(calls[0].raw)
		if err != nil {
			t.Fatalf("the backend got a malformed resolution %s: %v", calls[0].raw, err)
		}
		if err := envelope.Verify(env, r); err != nil {
			t.Fatalf("the backend got %s: %v", calls[0].raw, err)
		}
		if r.Kind == envelope.KindQuestion {
			t.Fatalf("the backend got a question through a closed hatch")
		}
	})
}

// FuzzAuthorized: no path but one beginning with the console's key reaches the page or the
// resolution POST, and checkCSRF accepts only tokens the console signed.
func FuzzAuthorized(f *testing.F) {
	for _, seed := range []string{"/" + testToken + "/", "/" + testToken + "/resolve", "/", "/x/" + testToken + "/",
		"/" + testToken, "/%30123456789abcdef0123456789abcdef/", "//" + testToken + "/", "/" + testToken + "%2F", testCSRF} {
		f.Add(seed)
	}
	c := newTestConsole(f, &fakeBackend{})
	f.Fuzz(func(t *testing.T, s string) {
		req, err := http.NewRequest(http.MethodGet, "http://127.0.0.1:8080", nil)
		if err != nil {
			t.Skip()
		}
		req.URL.Path = s
		if _, ok := c.authorized(req); ok && !strings.HasPrefix(req.URL.EscapedPath(), "/"+testToken+"/") {
			t.Fatalf("path %q was admitted", s)
		}
		if c.checkCSRF(s) && s != testCSRF {
			t.Fatalf("token %q was accepted", s)
		}
	})
}
