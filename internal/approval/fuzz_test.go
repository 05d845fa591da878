package approval

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzParseID: only 43 characters of base64url decoding to 32 bytes are identifiers.
func FuzzParseID(f *testing.F) {
	for _, s := range []string{newID(), "", "x", strings.Repeat("A", 43), strings.Repeat("_", 43), strings.Repeat("=", 43)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseID(s)
		if err == nil && (got != s || len(s) != randomIDLen || strings.ContainsAny(s, "=+/ \x00")) {
			t.Fatalf("parseID(%q) accepted", s)
		}
	})
}

// FuzzParseMomentRef: an accepted moment is one or two plain names, so what goes back into a
// redirect's fragment can hold no other URL part.
func FuzzParseMomentRef(f *testing.F) {
	for _, s := range []string{"payments/pay-1", "a/b.c", "", "/", "a//b", "a/b/c", "a/b#c", "A/b", "a/b\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ns, name, err := parseMomentRef(s)
		if err != nil {
			return
		}
		if (ns != "" && ns+"/"+name != s) || (ns == "" && name != s) || strings.ContainsAny(s, "#?%:\\ \r\n\t@") || strings.Count(s, "/") > 1 {
			t.Fatalf("parseMomentRef(%q) = %q, %q", s, ns, name)
		}
	})
}

// FuzzServeUnsigned: any request from someone without a session — any path, method, cookie,
// Origin and body — is answered without a panic and never with a moment page; a POST never
// reaches a backend (there is none without a session).
func FuzzServeUnsigned(f *testing.F) {
	f.Add("POST", "/resolve", SessionCookie+"="+newID(), testExternal, "token=x&moment=a/b&choice=declined")
	f.Add("GET", "/login?moment=a/b&stepup=1", "", "", "")
	f.Add("GET", "/callback?state=x&code=y", LoginCookie+"=x", "", "")
	f.Add("POST", "/signout", SessionCookie+"=;"+SessionCookie+"=x", testExternal, "token=&token=")
	f.Add("GET", "/static/../../etc/passwd", "", "", "")
	s := newTestService(f, nil)
	f.Fuzz(func(t *testing.T, method, target, cookie, origin, body string) {
		if !strings.HasPrefix(target, "/") {
			return
		}
		req, err := http.NewRequest(method, "https://approve.example.test:8443"+target, strings.NewReader(body))
		if err != nil {
			return
		}
		req.Host = "approve.example.test:8443"
		req.Header.Set("Cookie", cookie)
		req.Header.Set("Origin", origin)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if strings.Contains(rec.Body.String(), `data-testid="decision"`) || strings.Contains(rec.Body.String(), "Resolving as") {
			t.Fatalf("%s %s without a session got a moment page", method, target)
		}
	})
}
