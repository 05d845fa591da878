package sidecar

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/actgate/actgate/internal/diag"
	"github.com/actgate/actgate/internal/policysource"
	"github.com/actgate/actgate/internal/review"
	"github.com/actgate/actgate/test/testutil"
)

// TestSidecarSaysWhyItIsNotReady runs the assembled sidecar against an authority service that
// does not answer, answers with a certificate its CA does not sign, or answers without a review
// protocol level (older than the sidecar), and upstreams that are
// down or present an untrusted certificate: its log names each reason with its stable code at
// start and then at a bounded rate, and its readiness answer lists the same codes with a fix.
func TestSidecarSaysWhyItIsNotReady(t *testing.T) {
	oldInterval, oldPeriod := readinessCheckInterval, readinessLogPeriod
	readinessCheckInterval, readinessLogPeriod = 50*time.Millisecond, 600*time.Millisecond
	t.Cleanup(func() { readinessCheckInterval, readinessLogPeriod = oldInterval, oldPeriod })

	s := newStub(t, bankModes)
	files := writeSidecarFiles(t, s)
	untrusted := httptest.NewTLSServer(http.NotFoundHandler()) // an upstream whose CA the sidecar is not given
	t.Cleanup(untrusted.Close)
	otherCA := testutil.NewPKI(t, t.TempDir(), "localhost").CAFile // a CA that signed neither server
	downUpstream := "http://" + testutil.FreeAddr(t) + "/mcp"
	old := newStub(t, bankModes) // a service of a release before review protocol levels
	old.level.Store(-1)
	oldCA := writeSidecarFiles(t, old).ca

	for _, tc := range []struct {
		name              string
		authorityURL, ca  string
		wantAuthority     string
		wantUpstreams     map[string]string
		wantReasonsLogged []string
	}{
		{"authority unreachable", "https://" + testutil.FreeAddr(t), files.ca, diag.AuthorityUnreachable,
			map[string]string{"payments": diag.UpstreamUnreachable, "mail": diag.UpstreamTLSFailure},
			[]string{diag.NotYetReceived, diag.AuthorityUnreachable, diag.UpstreamUnreachable, diag.UpstreamTLSFailure}},
		{"authority certificate from another CA", s.srv.URL, otherCA, diag.AuthorityTLSFailure,
			map[string]string{"payments": diag.UpstreamUnreachable, "mail": diag.UpstreamTLSFailure},
			[]string{diag.NotYetReceived, diag.AuthorityTLSFailure, diag.UpstreamUnreachable, diag.UpstreamTLSFailure}},
		{"authority older than the sidecar", old.srv.URL, oldCA, diag.AuthorityTooOld,
			map[string]string{"payments": diag.UpstreamUnreachable, "mail": diag.UpstreamTLSFailure},
			[]string{diag.NotYetReceived, diag.AuthorityTooOld, diag.UpstreamUnreachable, diag.UpstreamTLSFailure}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var lines []map[string]any
			logger := funcr.NewJSON(func(obj string) {
				var m map[string]any
				if json.Unmarshal([]byte(obj), &m) == nil {
					mu.Lock()
					lines = append(lines, m)
					mu.Unlock()
				}
			}, funcr.Options{})
			sc, err := New(Config{
				Listen: "127.0.0.1:0", AuthorityURL: tc.authorityURL, AuthorityCAFile: tc.ca, TokenFile: files.token,
				PublicKeyFile: files.key, Namespace: testNS, Agent: testAgent, SinkID: testSink,
				Upstreams: []Upstream{
					{Name: "payments", URL: downUpstream, CredentialFile: files.cred},
					{Name: "mail", URL: untrusted.URL + "/mcp"},
				},
				JournalDir: filepath.Join(t.TempDir(), "journal"), ReviewTimeout: 200 * time.Millisecond, Log: logger,
			})
			if err != nil {
				t.Fatal(err)
			}
			base, stop := serveOnLoopback(t, sc)
			start := time.Now()
			var body readyBody
			deadline := time.Now().Add(10 * time.Second)
			for {
				body = getReady(t, base)
				if body.Authority == tc.wantAuthority || time.Now().After(deadline) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			time.Sleep(1500 * time.Millisecond) // three log periods
			stop()
			if t.Failed() {
				t.FailNow()
			}
			elapsed := time.Since(start)

			if body.Ready || body.Reason != diag.NotYetReceived || body.Authority != tc.wantAuthority {
				t.Fatalf("readiness %+v, want not ready, reason %s, authority %s", body, diag.NotYetReceived, tc.wantAuthority)
			}
			for name, want := range tc.wantUpstreams {
				if body.Upstreams[name] != want {
					t.Errorf("upstream %s: %q, want %q", name, body.Upstreams[name], want)
				}
			}
			for _, p := range body.Problems {
				if p.Fix == "" || p.Message == "" {
					t.Errorf("problem without a message or a fix: %+v", p)
				}
				if strings.Contains(p.Message, testToken) || strings.Contains(p.Message, upstreamTk) {
					t.Errorf("a credential reached the readiness answer: %+v", p)
				}
			}

			mu.Lock()
			defer mu.Unlock()
			logged := map[string]int{}
			for _, l := range lines {
				if l["msg"] == "Not ready" {
					logged[l["reason"].(string)+"/"+l["subject"].(string)]++
				}
			}
			// At most one line per reason and subject per period, plus the first.
			bound := int(elapsed/readinessLogPeriod) + 1
			for _, want := range tc.wantReasonsLogged {
				n := 0
				for key, c := range logged {
					if strings.HasPrefix(key, want+"/") {
						n = max(n, c)
					}
				}
				if n == 0 {
					t.Errorf("reason %s never logged; logged %v", want, logged)
				}
				if n > bound {
					t.Errorf("reason %s logged %d times in %s, want at most %d", want, n, elapsed, bound)
				}
			}
		})
	}
}

func getReady(t *testing.T, base string) readyBody {
	t.Helper()
	resp, err := http.Get(base + ReadyPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var b readyBody
	if err := json.Unmarshal(data, &b); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	return b
}

// TestReadinessVerifiesUpstreamTLS: an https upstream is ready only when its certificate
// verifies with the CA the sidecar is given (sidecar.upstreamCA).
func TestReadinessVerifiesUpstreamTLS(t *testing.T) {
	up := httptest.NewTLSServer(http.NotFoundHandler())
	defer up.Close()
	src, err := policysource.New(policysource.Options{Client: &onePolicy{}})
	if err != nil {
		t.Fatal(err)
	}
	ups := []Upstream{{Name: "payments", URL: up.URL + "/mcp"}, {Name: "bad", URL: "ftp://x/"}}
	pool := x509.NewCertPool()
	pool.AddCert(up.Certificate())
	for _, tc := range []struct {
		name string
		ca   *x509.CertPool
		want string
	}{
		{"without the upstream CA", nil, diag.UpstreamTLSFailure},
		{"with the upstream CA", pool, "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := upstreamTLSConfig("")
			if err != nil || cfg != nil {
				t.Fatalf("no CA file: %v %v", cfg, err)
			}
			if tc.ca != nil {
				cfg = upstreamTLSConfigFromPool(tc.ca)
			}
			_, b := readyz(t, newReadiness(src, ups, cfg), "")
			if b.Upstreams["payments"] != tc.want || b.Upstreams["bad"] != diag.UpstreamBadURL {
				t.Fatalf("upstreams %v, want payments %s and bad %s", b.Upstreams, tc.want, diag.UpstreamBadURL)
			}
		})
	}
}

// TestPolicySourceNamesTheAuthorityProblem: the policy source's status says why the service
// gave no answer: refused (4xx), unreachable; and clears it once the service answers.
func TestPolicySourceNamesTheAuthorityProblem(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"refused", review.ErrPolicyRefused, diag.AuthorityRefused},
		{"unreachable", review.ErrUnavailable, diag.AuthorityUnreachable},
		{"a service older than the sidecar", review.ErrServiceTooOld, diag.AuthorityTooOld},
		{"the sidecar refused as too old", review.ErrSidecarRefused, diag.SidecarTooOld},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, err := policysource.New(policysource.Options{Client: failingPolicy{tc.err}, MinBackoff: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() { _ = src.Run(ctx) }()
			deadline := time.Now().Add(5 * time.Second)
			for src.Status().Authority == "" && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if st := src.Status(); st.Authority != tc.want || st.AuthoritySince.IsZero() {
				t.Fatalf("status %+v, want authority %s", st, tc.want)
			}
		})
	}
}

type failingPolicy struct{ err error }

func (f failingPolicy) PodPolicy(context.Context, string, time.Duration) (*review.PodPolicy, error) {
	return nil, f.err
}
