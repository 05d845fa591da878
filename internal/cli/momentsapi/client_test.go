package momentsapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/actgate/actgate/internal/cli"
)

// TestClientAnswers: what the command line makes of each kind of answer the gate's moments API
// can give (the gate itself is exercised by cmd/actgate's tests): the principal's token on every
// request and the resolution sent as given; a 2xx answer decoded; an API refusal exits rejected
// with the API's code first; an answer that is not the API's (a proxy's HTML, an unreadable body,
// no gate at all) exits rejected as GATE_ERROR or GATE_UNREACHABLE, never as a success.
func TestClientAnswers(t *testing.T) {
	var gotAuth, gotBody, gotPath string
	answer := func(status int, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			gotAuth, gotPath = r.Header.Get("Authorization"), r.URL.RequestURI()
			b, _ := io.ReadAll(r.Body)
			gotBody = string(b)
			w.WriteHeader(status)
			_, _ = w.Write([]byte(body))
		}
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		h        http.HandlerFunc
		call     func(c *Client) error
		wantPath string
		wantLine string // "" = success
	}{
		{"list", answer(200, `{"moments":[{"id":"m1"}]}`), func(c *Client) error {
			ms, err := c.Moments(ctx, true)
			if err == nil && (len(ms) != 1 || ms[0].ID != "m1") {
				return errors.New("decoded wrong")
			}
			return err
		}, "/v1/moments?all=1", ""},
		{"resolve", answer(200, `{"momentID":"m/1"}`), func(c *Client) error {
			_, err := c.Resolve(ctx, "m/1", []byte(`{"r":1}`))
			return err
		}, "/v1/moments/m%2F1/resolve", ""},
		{"API refusal", answer(409, `{"error":{"code":"MOMENT_NOT_PENDING","message":"already resolved"}}`), func(c *Client) error {
			_, err := c.Moment(ctx, "m1")
			return err
		}, "/v1/moments/m1", "MOMENT_NOT_PENDING already resolved"},
		{"not the API's error", answer(502, `<html>bad gateway</html>`), func(c *Client) error {
			_, err := c.Moments(ctx, false)
			return err
		}, "/v1/moments", "GATE_ERROR HTTP 502"},
		{"unreadable success", answer(200, `{"moments":`), func(c *Client) error {
			_, err := c.Moments(ctx, false)
			return err
		}, "/v1/moments", "GATE_ERROR unreadable answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.h)
			defer srv.Close()
			err := tc.call(&Client{Server: srv.URL + "/", Principal: "alice", Token: "tok", HTTP: srv.Client()})
			if gotAuth != "Bearer tok" || gotPath != tc.wantPath {
				t.Fatalf("request: Authorization %q, path %q; want the token and %q", gotAuth, gotPath, tc.wantPath)
			}
			if tc.name == "resolve" && gotBody != `{"r":1}` {
				t.Fatalf("resolution sent as %q", gotBody)
			}
			checkErr(t, err, tc.wantLine)
		})
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err := (&Client{Server: url, Token: "tok", HTTP: &http.Client{}}).Moments(ctx, false)
	checkErr(t, err, "GATE_UNREACHABLE")
}

func checkErr(t *testing.T, err error, wantLine string) {
	t.Helper()
	if wantLine == "" {
		if err != nil {
			t.Fatalf("error %v, want success", err)
		}
		return
	}
	var e *cli.ExitError
	if !errors.As(err, &e) || e.Status != cli.ExitRejected || len(e.Lines) != 1 || !strings.HasPrefix(e.Lines[0], wantLine) {
		t.Fatalf("error %#v, want exit %d with a line beginning %q", err, cli.ExitRejected, wantLine)
	}
}
