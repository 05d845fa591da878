//go:build unix

package faults

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/authority/boltstore"
	"github.com/actgate/actgate/internal/authority/leasestore"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/review"
	"github.com/actgate/actgate/internal/review/service"
	"github.com/actgate/actgate/internal/sidecar"
	"github.com/actgate/actgate/test/envtest"
	"github.com/actgate/actgate/test/testutil"
)

// The Kubernetes rig (doc.go, "The sidecar path"): envtest's API server behind apiFaults,
// `actgate-controlplane authority` behind authorityFaults, `actgate sidecar`, one upstream.
//
//	agent ─MCP─▶ actgate sidecar ─HTTPS─▶ authorityFaults ─▶ actgate-controlplane authority ─HTTPS─▶ apiFaults ─▶ kube-apiserver
//	                   └──────────────▶ upstream (mcptest)

const (
	k8sSink  = "faults-sink"
	agentSA  = "agent"
	agentApp = "faults-agent"
)

// sharedEnv is the package's one control plane, started by the first test that needs it and
// stopped by TestMain.
var sharedEnv struct {
	once sync.Once
	env  *envtest.Env
	err  error
}

func apiServer(t *testing.T) *envtest.Env {
	t.Helper()
	envtest.SkipIfShort(t)
	sharedEnv.once.Do(func() { sharedEnv.env, sharedEnv.err = envtest.New(context.Background(), envtest.WithLog(io.Discard)) })
	if sharedEnv.err != nil {
		t.Fatalf("envtest: %v", sharedEnv.err)
	}
	return sharedEnv.env
}

// apiMode is what apiFaults does with a request.
type apiMode int32

const (
	apiPass      apiMode = iota
	apiDown              // every connection is closed unanswered
	apiConflicts         // every Lease update is 409 Conflict; the rest passes
	api500               // every request is 500
	apiAct500            // every Act request is 500; the rest passes
)

// apiFaults is a reverse proxy in front of the API server, with the admin's credentials, that
// injects faults on command. The authority service reaches the API server only through it.
type apiFaults struct {
	srv    *httptest.Server
	mode   atomic.Int32
	faults atomic.Int32 // requests answered with a fault
}

func newAPIFaults(t *testing.T, cfg *rest.Config) *apiFaults {
	t.Helper()
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = rt
	rp.ErrorLog = log.New(io.Discard, "", 0)
	f := &apiFaults{}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lease := strings.Contains(r.URL.Path, "/apis/coordination.k8s.io/")
		acts := strings.HasPrefix(r.URL.Path, "/apis/actgate.io/") && (strings.HasSuffix(r.URL.Path, "/acts") || strings.Contains(r.URL.Path, "/acts/"))
		switch apiMode(f.mode.Load()) {
		case apiDown:
			f.faults.Add(1)
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				_ = conn.Close()
			}
			return
		case apiConflicts:
			if lease && (r.Method == http.MethodPut || r.Method == http.MethodPatch) {
				f.faults.Add(1)
				status(w, http.StatusConflict, "Conflict", "the object has been modified; please apply your changes to the latest version and try again")
				return
			}
		case api500:
			f.faults.Add(1)
			status(w, http.StatusInternalServerError, "InternalError", "injected")
			return
		case apiAct500:
			if acts {
				f.faults.Add(1)
				status(w, http.StatusInternalServerError, "InternalError", "injected")
				return
			}
		}
		rp.ServeHTTP(w, r)
	}))
	f.srv.EnableHTTP2 = false
	f.srv.StartTLS()
	t.Cleanup(f.srv.Close)
	return f
}

// status writes a metav1.Status error as the API server would.
func status(w http.ResponseWriter, code int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Code: int32(code), Reason: metav1.StatusReason(reason), Message: msg})
}

// kubeconfig writes a kubeconfig for the proxy (no credentials: the proxy adds the admin's).
func (f *apiFaults) kubeconfig(t *testing.T, dir string) string {
	t.Helper()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.srv.Certificate().Raw})
	b, _ := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Config", "current-context": "faults",
		"clusters": []any{map[string]any{"name": "faults", "cluster": map[string]any{"server": f.srv.URL, "certificate-authority-data": ca}}},
		"users":    []any{map[string]any{"name": "faults", "user": map[string]any{}}},
		"contexts": []any{map[string]any{"name": "faults", "context": map[string]any{"cluster": "faults", "user": "faults"}}},
	})
	return testutil.WriteFile(t, dir, "kubeconfig", b)
}

// authMode is what authorityFaults does with a review.
type authMode int32

const (
	authPass           authMode = iota
	authSlow                    // answers after the sidecar's review timeout
	authNotJSON                 // 200 with a body that is not JSON
	authWrongKind               // 200 with JSON that is not an ActReview
	authBadSig                  // the real answer with the authority's signature corrupted
	authDown                    // every connection is closed unanswered
	authNoLevel                 // the real answer without the service's review protocol level (a service before levels)
	authNoSidecarLevel          // the request reaches the service without the sidecar's level (a sidecar before levels)
)

// authorityFaults is a TLS reverse proxy in front of the authority service that corrupts or
// delays its answers on command.
type authorityFaults struct {
	srv    *httptest.Server
	mode   atomic.Int32
	delay  time.Duration
	mu     sync.Mutex
	issued []string // authority ids the service issued (seen in answers)
	ops    map[review.Operation]int
}

func newAuthorityFaults(t *testing.T, backend string, p *pki, delay time.Duration) *authorityFaults {
	t.Helper()
	target, _ := url.Parse(backend)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.Pool, MinVersion: tls.VersionTLS12}}
	rp.ErrorLog = log.New(io.Discard, "", 0)
	f := &authorityFaults{delay: delay, ops: map[review.Operation]int{}}
	rp.ModifyResponse = f.modify
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if rv, _, err := review.DecodeRequest(body); err == nil {
			f.mu.Lock()
			f.ops[rv.Request.Operation]++
			f.mu.Unlock()
		}
		switch authMode(f.mode.Load()) {
		case authDown:
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				_ = conn.Close()
			}
			return
		case authSlow:
			select {
			case <-time.After(f.delay):
			case <-r.Context().Done():
				return
			}
		case authNotJSON:
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte("<html>502 Bad Gateway</html>"))
			return
		case authWrongKind:
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"apiVersion":"v1","kind":"Status","status":"Success","allowed":true}`))
			return
		case authNoSidecarLevel:
			r.Header.Del(review.LevelHeader)
		}
		rp.ServeHTTP(w, r)
	}))
	f.srv.TLS = &tls.Config{Certificates: []tls.Certificate{p.Cert}, MinVersion: tls.VersionTLS12}
	f.srv.StartTLS()
	t.Cleanup(f.srv.Close)
	return f
}

// modify records issued authorities and, in authBadSig, corrupts their signatures; in
// authNoLevel it removes the service's review protocol level from every answer.
func (f *authorityFaults) modify(resp *http.Response) error {
	if authMode(f.mode.Load()) == authNoLevel {
		resp.Header.Del(review.LevelHeader)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return err
	}
	var rv review.ActReview
	if json.Unmarshal(body, &rv) == nil && rv.Response != nil && rv.Response.Authority != nil {
		f.mu.Lock()
		f.issued = append(f.issued, rv.Response.Authority.ID)
		f.mu.Unlock()
		if authMode(f.mode.Load()) == authBadSig && len(rv.Response.Authority.Signature) > 0 {
			rv.Response.Authority.Signature[0] ^= 0xff
			body, _ = json.Marshal(rv)
		}
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Del("Content-Length")
	return nil
}

func (f *authorityFaults) issuedIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.issued...)
}

func (f *authorityFaults) count(op review.Operation) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ops[op]
}

// pki is the TLS of the authority and its fault proxy (a CA and a serving certificate for
// 127.0.0.1) and the authority's signing key.
type pki struct {
	*testutil.PKI
	signingKey string
	publicKey  string
	signer     *authority.Signer
}

func newPKI(t *testing.T, dir string) *pki {
	t.Helper()
	p := &pki{PKI: testutil.NewPKI(t, dir)}
	p.signingKey, p.publicKey = testutil.SigningKey(t, dir)
	var err error
	if p.signer, err = authority.LoadKey(p.signingKey); err != nil {
		t.Fatal(err)
	}
	return p
}

// proc is one actgate process with its output (stdout and stderr).
type proc struct {
	*testutil.Process
	addrRE *regexp.Regexp
}

func startProc(t *testing.T, env []string, addrRE string, args ...string) *proc {
	t.Helper()
	return startBin(t, actgateBin, env, addrRE, args...)
}

// startBin is startProc of another binary (controlPlaneBin for the authority service).
func startBin(t *testing.T, bin string, env []string, addrRE string, args ...string) *proc {
	t.Helper()
	return &proc{Process: testutil.StartProcess(t, bin, args, env, true), addrRE: regexp.MustCompile(addrRE)}
}

// addr waits for the process to print its listen address.
func (p *proc) addr(t *testing.T) string {
	t.Helper()
	var m []string
	p.WaitFor(t, 30*time.Second, func() bool {
		m = p.addrRE.FindStringSubmatch(p.Out.String())
		return m != nil
	})
	return m[1]
}

// stop ends the process with SIGTERM and waits, however it exits.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	_ = p.Stop(t)
}

// k8sRig is one agent namespace with its policy, pod and token, an authority service and a
// sidecar in front of one upstream.
type k8sRig struct {
	env     *envtest.Env
	ns      string
	dir     string
	pki     *pki
	api     *apiFaults
	auth    *proc
	authF   *authorityFaults
	up      *upstream
	token   string
	journal string // the sidecar's journal dir
	leases  *leasestore.Store
	// reviewTimeout is the sidecar's bound on one request to the service, callTimeout on one
	// upstream tools/call.
	reviewTimeout, callTimeout time.Duration
}

type rigOptions struct {
	hold          bool          // the upstream's ticket_create blocks until released
	authDelay     time.Duration // authSlow's delay
	reviewTimeout time.Duration // the sidecar's --review-timeout (default 5s)
	serviceTO     time.Duration // the authority's --review-timeout (default 3s)
	callTimeout   time.Duration // the sidecar's --call-timeout (default 5s)
}

func newK8sRig(t *testing.T, o rigOptions) *k8sRig {
	t.Helper()
	env := apiServer(t)
	if o.reviewTimeout == 0 {
		o.reviewTimeout = 5 * time.Second
	}
	if o.serviceTO == 0 {
		o.serviceTO = 3 * time.Second
	}
	if o.callTimeout == 0 {
		o.callTimeout = 5 * time.Second
	}
	r := &k8sRig{env: env, ns: env.Namespace(t), dir: t.TempDir(), reviewTimeout: o.reviewTimeout, callTimeout: o.callTimeout}
	r.journal = filepath.Join(r.dir, "journal")
	r.pki = newPKI(t, r.dir)
	r.up = startUpstream(t, o.hold, nil)
	ctx := context.Background()

	// The agent's service account and pod (an API object: nothing runs), and the policy.
	if err := env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: agentSA, Namespace: r.ns}}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "agent-0", Namespace: r.ns, Labels: map[string]string{"app.kubernetes.io/name": agentApp}},
		Spec:       corev1.PodSpec{ServiceAccountName: agentSA, Containers: []corev1.Container{{Name: "agent", Image: "example.invalid/agent:1"}}},
	}
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	policy := &v1alpha1.ToolPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "tools", Namespace: r.ns},
		Spec: v1alpha1.ToolPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": agentApp}},
			Mode:        v1alpha1.PolicyModeEnforce,
			Sink:        &v1alpha1.SinkIdentity{ID: k8sSink},
			Servers:     []v1alpha1.ToolServer{{Name: "tools", URL: r.up.URL, Protocol: v1alpha1.ServerProtocolMCP}},
			Rules: []v1alpha1.ToolRule{
				{Name: "reads", Tools: []string{hotTool}, ConsequenceClass: v1alpha1.ConsequenceInformational,
					Evidence: &v1alpha1.EvidenceRequirement{Role: v1alpha1.EvidenceRoleNone}},
				{Name: "tickets", Tools: []string{protectedTool},
					Evidence: &v1alpha1.EvidenceRequirement{Role: v1alpha1.EvidenceRolePolicyPermit}},
			},
		},
	}
	if err := env.Client.Create(ctx, policy); err != nil {
		t.Fatal(err)
	}
	envtest.AcceptPolicy(t, env.Client, policy, 1)

	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(r.ns).CreateToken(ctx, agentSA, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: []string{service.DefaultAudience}, ExpirationSeconds: ptr.To[int64](3600),
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r.token = testutil.WriteFile(t, r.dir, "token", []byte(tr.Status.Token))
	if r.leases, err = leasestore.NewForConfig(env.Config, leasestore.Options{Verifier: r.pki.signer.Verifier()}); err != nil {
		t.Fatal(err)
	}

	// The authority service, through the API fault proxy; the sidecar reaches it through the
	// authority fault proxy.
	r.api = newAPIFaults(t, env.Config)
	r.auth = startBin(t, controlPlaneBin, nil, `"address":"(127\.0\.0\.1:\d+)"`, "authority",
		"--kubeconfig", r.api.kubeconfig(t, r.dir), "--bind-address", "127.0.0.1:0", "--metrics-bind-address", "0",
		"--tls-cert-file", r.pki.CertFile, "--tls-private-key-file", r.pki.KeyFile, "--signing-key-file", r.pki.signingKey,
		"--review-timeout", o.serviceTO.String(), "--store-timeout", o.serviceTO.String(), "--shutdown-grace", "0s")
	r.authF = newAuthorityFaults(t, "https://"+r.auth.addr(t), r.pki, o.authDelay)
	return r
}

// startSidecar runs `actgate sidecar` for the rig (env added, e.g. ACTGATE_FAILPOINT) and
// returns its agent-facing MCP endpoint and the process.
func (r *k8sRig) startSidecar(t *testing.T, authorityURL string, env ...string) (string, *proc) {
	t.Helper()
	healthy := authorityURL == ""
	if healthy {
		authorityURL = r.authF.srv.URL
	}
	p := startProc(t, env, `serving on (http://127\.0\.0\.1:\d+)`, "sidecar",
		"--listen", "127.0.0.1:0", "--authority-url", authorityURL, "--authority-ca-file", r.pki.CAFile,
		"--token-file", r.token, "--authority-public-key-file", r.pki.publicKey, "--namespace", r.ns,
		"--service-account", agentSA, "--sink-id", k8sSink, "--servers", "tools", "--server", "tools="+r.up.URL,
		"--journal-dir", r.journal, "--call-timeout", r.callTimeout.String(), "--review-timeout", r.reviewTimeout.String(), "--verbose")
	base := p.addr(t)
	if healthy {
		// The sidecar decides with its pod's policy, which it follows from the service: a call
		// before the first answer is refused (EF_POLICY_UNAVAILABLE). Wait until it is ready.
		testutil.Eventually(t, 30*time.Second, "the sidecar to hold its pod's policy", func() error {
			resp, err := http.Get(base + sidecar.ReadyPath)
			if err != nil {
				return err
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: HTTP %d %s", sidecar.ReadyPath, resp.StatusCode, b)
			}
			return nil
		})
	}
	return base + mcpproxy.Path("tools"), p
}

// verifyReceipts runs `actgate receipts verify --key` on the stopped sidecar's receipt log (in
// its journal directory): it must exit 0. It returns the log's lines.
func (r *k8sRig) verifyReceipts(t *testing.T) []string {
	t.Helper()
	logPath := filepath.Join(r.journal, sidecar.ReceiptsFile)
	out, err := exec.Command(actgateBin, "receipts", "verify", "--key", filepath.Join(r.journal, sidecar.ReceiptPubFile), logPath).CombinedOutput()
	if err != nil {
		t.Fatalf("actgate receipts verify: %v\n%s", err, out)
	}
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// readJournal reads every record of the stopped sidecar's journal.
func (r *k8sRig) readJournal(t *testing.T) []journal.DispatchRecord {
	t.Helper()
	v, err := sidecar.LoadVerifier(r.pki.publicKey)
	if err != nil {
		t.Fatal(err)
	}
	st, err := boltstore.Open(filepath.Join(r.journal, sidecar.JournalFile), boltstore.Options{Verifier: v})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var out []journal.DispatchRecord
	for _, s := range []journal.State{journal.StateDispatchPending, journal.StateInvoked, journal.StateIndeterminate,
		journal.StateExecuted, journal.StateFailed, journal.StateConsumed} {
		recs, err := st.InState(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, recs...)
	}
	return out
}

// lease reads an authority from its Lease (a quorum read of the API server), or, for a pod's
// machine Permit, which stores no Lease, from the permit record of the Act that consumed it.
func (r *k8sRig) lease(t *testing.T, id string) authority.Record {
	t.Helper()
	rec, err := r.leases.Get(context.Background(), r.ns, id)
	if err == nil {
		return rec
	}
	if !errors.Is(err, authority.ErrNotFound) {
		t.Fatalf("authority %s: %v", id, err)
	}
	var acts v1alpha1.ActList
	if err := r.env.Client.List(context.Background(), &acts, client.InNamespace(r.ns)); err != nil {
		t.Fatal(err)
	}
	for _, a := range acts.Items {
		if a.Annotations[v1alpha1.AnnotationActPermitAuthority] != id {
			continue
		}
		auth, err := authority.ParsePayload([]byte(a.Annotations[v1alpha1.AnnotationActPermitPayload]))
		if err != nil || auth.ID != id {
			t.Fatalf("Act %s: its permit record does not hold authority %s: %v", a.Name, id, err)
		}
		at, _ := time.Parse(time.RFC3339Nano, a.Annotations[v1alpha1.AnnotationActPermitConsumedAt])
		return authority.Record{Authority: auth, State: authority.StateConsumed, ConsumedBy: a.Annotations[v1alpha1.AnnotationActPermitOperation], ConsumedAt: at}
	}
	t.Fatalf("authority %s: no Lease and no Act records it", id)
	return authority.Record{}
}

func (r *k8sRig) String() string { return fmt.Sprintf("rig(%s)", r.ns) }
