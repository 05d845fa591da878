package sidecar

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/actgate/actgate/internal/hostloop"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/review"
	"github.com/actgate/actgate/internal/upstreamauth"
)

func TestParsePublicKeys(t *testing.T) {
	ed := publicKeyPEM(t, signerFrom(t, "a"))
	ed2 := publicKeyPEM(t, signerFrom(t, "b"))
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecPEM, err := EncodePublicKey(ec.Public())
	if err != nil {
		t.Fatal(err)
	}
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	p384PEM, _ := EncodePublicKey(p384.Public())
	rk, _ := rsa.GenerateKey(rand.Reader, 1024)
	rsaDER, _ := x509.MarshalPKIXPublicKey(rk.Public())
	rsaPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: rsaDER})
	for _, tc := range []struct {
		name string
		in   []byte
		n    int // keys expected; 0 = error
	}{
		{"one ed25519", ed, 1},
		{"rotation: two keys", append(append([]byte{}, ed...), ed2...), 2},
		{"ecdsa p-256 with surrounding blank lines", append(append([]byte("\n\n"), ecPEM...), '\n'), 1},
		{"empty", nil, 0},
		{"text before the block", append([]byte("trust me\n"), ed...), 0},
		{"text after the block", append(append([]byte{}, ed...), []byte("and this\n")...), 0},
		{"private key block", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}}), 0},
		{"certificate block", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1}}), 0},
		{"garbage DER", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte{1, 2, 3}}), 0},
		{"headers", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED"}, Bytes: []byte{1}}), 0},
		{"p-384", p384PEM, 0},
		{"rsa", rsaPEM, 0},
		{"truncated", ed[:len(ed)-20], 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys, err := ParsePublicKeys(tc.in)
			if tc.n == 0 {
				if err == nil {
					t.Fatalf("accepted %d keys", len(keys))
				}
				return
			}
			if err != nil || len(keys) != tc.n {
				t.Fatalf("got %d keys, %v; want %d", len(keys), err, tc.n)
			}
		})
	}
}

func FuzzParsePublicKeys(f *testing.F) {
	sum := [32]byte{}
	f.Add(publicKeyPEM(f, signerFrom(f, "fuzz")))
	f.Add([]byte("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"))
	f.Add([]byte("-----BEGIN "))
	f.Add(sum[:])
	f.Fuzz(func(t *testing.T, b []byte) {
		keys, err := ParsePublicKeys(b)
		if err == nil && len(keys) == 0 {
			t.Fatal("no error and no key")
		}
	})
}

func TestCheckLoopback(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:15080": true, "[::1]:15080": true, "127.0.0.1:0": true,
		"0.0.0.0:15080": false, ":15080": false, "localhost:15080": false, "10.0.0.5:15080": false,
		"127.0.0.1": false, "[::]:15080": false,
	} {
		if err := CheckLoopback(addr); (err == nil) != ok {
			t.Errorf("CheckLoopback(%q) = %v, want ok=%v", addr, err, ok)
		}
	}
}

// sidecarFiles writes what the pod would mount: token, public key, CA, credential.
type sidecarFiles struct {
	dir, token, key, ca, cred string
}

func writeSidecarFiles(t *testing.T, s *stub) sidecarFiles {
	dir := t.TempDir()
	return sidecarFiles{
		dir:   dir,
		token: writeFile(t, dir, "token", []byte(testToken+"\n")),
		key:   writeFile(t, dir, "authority.pub", publicKeyPEM(t, s.signer)),
		ca:    writeFile(t, dir, "ca.crt", certPEM(s.srv)),
		cred:  writeFile(t, dir, "credential", []byte(upstreamTk)),
	}
}

func TestNewConfigErrors(t *testing.T) {
	s := newStub(t, bankModes)
	files := writeSidecarFiles(t, s)
	good := Config{
		Listen: "127.0.0.1:0", AuthorityURL: s.srv.URL, AuthorityCAFile: files.ca, TokenFile: files.token,
		PublicKeyFile: files.key, Namespace: testNS, Agent: testAgent, SinkID: testSink,
		Upstreams:  []Upstream{{Name: "payments", URL: "http://127.0.0.1:1/mcp", CredentialFile: files.cred}},
		JournalDir: filepath.Join(files.dir, "journal"),
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
	}{
		{"listen on all interfaces", func(c *Config) { c.Listen = "0.0.0.0:15080" }},
		{"authority URL relative", func(c *Config) { c.AuthorityURL = "/v1" }},
		{"no token file", func(c *Config) { c.TokenFile = "" }},
		{"missing token file", func(c *Config) { c.TokenFile = filepath.Join(files.dir, "nope") }},
		{"no public key", func(c *Config) { c.PublicKeyFile = "" }},
		{"public key is a certificate", func(c *Config) { c.PublicKeyFile = files.ca }},
		{"CA file is a key", func(c *Config) { c.AuthorityCAFile = files.key }},
		{"agent of another namespace", func(c *Config) { c.Agent = "system:serviceaccount:other:agent" }},
		{"no sink", func(c *Config) { c.SinkID = "" }},
		{"no upstream", func(c *Config) { c.Upstreams = nil }},
		{"missing credential", func(c *Config) { c.Upstreams[0].CredentialFile = filepath.Join(files.dir, "nope") }},
		{"bad upstream name", func(c *Config) { c.Upstreams[0].Name = "Payments" }},
		{"credential file and OAuth", func(c *Config) {
			c.Upstreams[0].OAuth = &upstreamauth.Config{Grant: upstreamauth.GrantClientCredentials, TokenURL: "https://idp.example/token", ClientID: "c", ClientSecretFile: files.cred}
		}},
		{"OAuth that cannot work", func(c *Config) {
			c.Upstreams[0].CredentialFile = ""
			c.Upstreams[0].OAuth = &upstreamauth.Config{Grant: upstreamauth.GrantClientCredentials, TokenURL: "http://idp.example/token", ClientID: "c", ClientSecretFile: files.cred}
		}},
		{"no journal dir", func(c *Config) { c.JournalDir = "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			c.Upstreams = append([]Upstream(nil), good.Upstreams...)
			tc.edit(&c)
			sc, err := New(c)
			if err == nil {
				_ = sc.Close()
				t.Fatal("accepted")
			}
		})
	}
	sc, err := New(good)
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestSidecarServes: the assembled sidecar over a real loopback listener — TLS to the service
// with its CA file, the credential file presented upstream, the journal in its directory, the
// host-loop endpoint and health — and a clean shutdown that keeps the journal.
func TestSidecarServes(t *testing.T) {
	s := newStub(t, bankModes)
	files := writeSidecarFiles(t, s)
	up, err := mcptest.Start(bankTools(), mcptest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })
	s.spec, s.epoch = testPolicy(t, up.URL), 1
	journalDir := filepath.Join(files.dir, "journal")
	sc, err := New(Config{
		Listen: "127.0.0.1:0", AuthorityURL: s.srv.URL, AuthorityCAFile: files.ca, TokenFile: files.token,
		PublicKeyFile: files.key, Namespace: testNS, Agent: testAgent, SinkID: testSink,
		Upstreams:  []Upstream{{Name: "payments", URL: up.URL, CredentialFile: files.cred}},
		JournalDir: journalDir,
	})
	if err != nil {
		t.Fatal(err)
	}
	base, stop := serveOnLoopback(t, sc)

	resp, err := http.Get(base + HealthPath)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("health: %v %v", resp, err)
	}
	resp.Body.Close()
	// There is no HTTP tool proxy (ToolPolicy servers are MCP only): nothing answers there.
	resp, err = http.Post(base+"/http/payments", "application/json", strings.NewReader(`{}`))
	if err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("/http/payments: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, err = http.Post(base+hostloop.EnforcePath, "application/json", strings.NewReader(
		`{"vendor":"anthropic","block":{"type":"tool_use","id":"toolu_1","name":"send_payment","input":{"amount":2}}}`))
	if err != nil {
		t.Fatal(err)
	}
	var d hostloop.Decision
	_ = json.NewDecoder(resp.Body).Decode(&d)
	resp.Body.Close()
	if !d.Allow || d.OperationID == "" {
		t.Fatalf("enforce through the assembled sidecar: %+v", d)
	}
	if s.lastToken() != testToken {
		t.Fatalf("service saw token %q", s.lastToken())
	}
	// And an MCP call through /mcp/payments, with the credential from the file.
	cs := connectTo(t, base+"/mcp/payments")
	if res := call(t, cs, "send_payment", `{"amount":3}`); res.IsError || up.Count("send_payment") != 1 {
		t.Fatalf("MCP through the sidecar: %s (count %d)", text(res), up.Count("send_payment"))
	}
	if got := up.Authorizations(); got[len(got)-1] != "Bearer "+upstreamTk {
		t.Fatalf("upstream saw %q", got[len(got)-1])
	}
	_ = cs.Close()
	// And at /payments/mcp, the form the MCP Inspector reaches (mcpproxy.AltPath).
	cs = connectTo(t, base+"/payments/mcp")
	if res := call(t, cs, "send_payment", `{"amount":4}`); res.IsError || up.Count("send_payment") != 2 {
		t.Fatalf("MCP through the sidecar at /payments/mcp: %s (count %d)", text(res), up.Count("send_payment"))
	}
	_ = cs.Close()

	stop()
	if t.Failed() {
		t.FailNow()
	}
	// The log's last checkpoint, signed at shutdown, was anchored with the authority service.
	s.mu.Lock()
	anchors := append([]review.AnchorRequest(nil), s.anchors...)
	s.mu.Unlock()
	lines, err := os.ReadFile(filepath.Join(journalDir, ReceiptsFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(anchors) == 0 || anchors[len(anchors)-1].Checkpoint.Seq < 2 ||
		!strings.Contains(string(lines), anchors[len(anchors)-1].Checkpoint.Head) {
		t.Fatalf("anchors posted: %+v", anchors)
	}
	// The journal survives the process; the host-loop dispatch never completed, so a restart
	// makes it INDETERMINATE (AEB: in-flight on restart is indeterminate, never guessed).
	sc2, err := New(Config{
		Listen: "127.0.0.1:0", AuthorityURL: s.srv.URL, AuthorityCAFile: files.ca, TokenFile: files.token,
		PublicKeyFile: files.key, Namespace: testNS, Agent: testAgent, SinkID: testSink,
		Upstreams: []Upstream{{Name: "payments", URL: up.URL}}, JournalDir: journalDir,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sc2.Close()
	rec, err := sc2.Journal().Record(context.Background(), d.OperationID)
	if err != nil || rec.State != journal.StateIndeterminate {
		t.Fatalf("after restart: %+v %v", rec, err)
	}
	executed, _ := sc2.Journal().InState(context.Background(), journal.StateExecuted)
	if len(executed) != 2 {
		t.Fatalf("%d EXECUTED records after restart, want the two MCP calls'", len(executed))
	}
}
