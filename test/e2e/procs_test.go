package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/actgate/actgate/test/envtest"
)

// buildBinaries builds actgate, actgate-controlplane and kubectl-actgate once into dir, with the caller's Go
// environment (never the tools' private XDG_CACHE_HOME: that would move Go's build cache).
func buildBinaries(t *testing.T, root, dir string) {
	t.Helper()
	start := time.Now()
	cmd := exec.Command("go", "build", "-o", dir+string(os.PathSeparator), "./cmd/actgate", "./cmd/actgate-controlplane", "./cmd/kubectl-actgate")
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out.String())
	}
	t.Logf("built actgate, actgate-controlplane and kubectl-actgate in %s", time.Since(start).Round(100*time.Millisecond))
}

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// proc is one of actgate's processes, its output kept in a file and shown when the test fails.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// start runs bin with args and env; it is stopped with SIGTERM (then killed after 15 s) when
// the test ends, before the API server stops (cleanups run last-registered first).
func start(t *testing.T, name, bin string, env []string, args ...string) *proc {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	// Both to the file itself: exec connects it to the child directly, and the kernel
	// serialises the two streams' writes.
	cmd.Stdout, cmd.Stderr = f, f
	cmd.WaitDelay = 15 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop(t)
		_ = f.Close()
		if t.Failed() {
			t.Logf("----- %s output -----\n%s", name, p.output())
		}
	})
	return p
}

func (p *proc) output() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM (the processes shut down gracefully on it) and waits; a process that
// does not exit in time is killed and the test fails.
func (p *proc) stop(t *testing.T) {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if p.err != nil {
			t.Errorf("%s exited with %v after SIGTERM", p.name, p.err)
		}
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Errorf("%s did not stop within 20 s of SIGTERM", p.name)
	}
}

// waitTLS waits until addr accepts TLS connections whose certificate roots verifies for
// 127.0.0.1, or the process exits.
func waitTLS(t *testing.T, p *proc, addr string, roots *x509.CertPool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
		if err == nil {
			_ = conn.Close()
			return
		}
		if p.exited() {
			t.Fatalf("%s exited before serving on %s: %v\n%s", p.name, addr, p.err, p.output())
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not serving TLS on %s: %v\n%s", p.name, addr, err, p.output())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitTCP waits until addr accepts TCP connections, or the process exits.
func waitTCP(t *testing.T, p *proc, addr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = conn.Close()
			return
		}
		if p.exited() {
			t.Fatalf("%s exited before listening on %s: %v\n%s", p.name, addr, p.err, p.output())
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not listening on %s: %v\n%s", p.name, addr, err, p.output())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// pki is a CA made here with crypto/x509 and a serving certificate for 127.0.0.1 (in a
// cluster the operator's cert-controller makes them for the Services' names).
type pki struct {
	caPEM            []byte
	pool             *x509.CertPool
	certFile, keyDir string // keyDir holds tls.crt and tls.key
	keyFile          string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "actgate-e2e-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "actgate-e2e"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames:    []string{"localhost", "actgate-webhook-service.actgate-system.svc", "actgate-authority.actgate-system.svc"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := &pki{caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), pool: x509.NewCertPool(), keyDir: dir}
	p.pool.AddCert(ca)
	p.certFile = writeFile(t, dir, "tls.crt", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}))
	p.keyFile = writeFile(t, dir, "tls.key", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
	return p
}

// signingKey writes a fresh Ed25519 authority-signing key (PKCS#8, mode 0600) and its public
// key (PKIX), and returns their paths.
func signingKey(t *testing.T, dir string) (priv, pub string) {
	t.Helper()
	pk, sk, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	skDER, err := x509.MarshalPKCS8PrivateKey(sk)
	if err != nil {
		t.Fatal(err)
	}
	pkDER, err := x509.MarshalPKIXPublicKey(pk)
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, dir, "signing.key", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: skDER})),
		writeFile(t, dir, "signing.pub", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pkDER}))
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// tool runs kubectl (or helm) from the Env's folder with extra PATH entries in front (the
// plugin) and, when kubeconfig is set, as that kubeconfig's user. It returns stdout, stderr
// and the error, for steps that expect a refusal.
func tool(t *testing.T, env *envtest.Env, pathDirs []string, kubeconfig, name string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := env.Command(ctx, name, args...)
	for i, kv := range cmd.Env {
		switch {
		case strings.HasPrefix(kv, "PATH="):
			cmd.Env[i] = "PATH=" + strings.Join(append(append([]string{}, pathDirs...), strings.TrimPrefix(kv, "PATH=")), string(os.PathListSeparator))
		case kubeconfig != "" && strings.HasPrefix(kv, "KUBECONFIG="):
			cmd.Env[i] = "KUBECONFIG=" + kubeconfig
		}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// eventually polls cond every 100 ms for up to d.
func eventually(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	var last string
	for {
		ok, why := cond()
		if ok {
			return
		}
		last = why
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %s", d, what, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
