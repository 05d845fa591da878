package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
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
