package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// buildActgate builds cmd/actgate and cmd/actgate-controlplane into dir with the caller's Go
// environment (never a tool's private XDG_CACHE_HOME: that would move Go's build cache, and a
// cold cache rebuilds everything) and returns the path of actgate; actgate-controlplane is beside
// it (controlPlaneBin).
func buildActgate(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "actgate")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dir+string(os.PathSeparator), "./cmd/actgate", "./cmd/actgate-controlplane")
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/actgate ./cmd/actgate-controlplane: %w\n%s", err, out.String())
	}
	return bin, nil
}

// controlPlaneBin is the actgate-controlplane that buildActgate wrote beside actgate.
func controlPlaneBin(actgate string) string {
	return filepath.Join(filepath.Dir(actgate), "actgate-controlplane")
}

// proc is one of actgate's processes, its output kept in a file.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	f    *os.File
	done chan struct{}
	err  error
}

// startProc runs bin with args; its output goes to dir/name.log.
func startProc(name, dir, bin string, env []string, args ...string) (*proc, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	// Both to the file itself: exec connects it to the child directly, and the kernel
	// serialises the two streams' writes.
	cmd.Stdout, cmd.Stderr = f, f
	cmd.WaitDelay = 15 * time.Second
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, f: f, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// output returns the last lines of the process's output, for error messages.
func (p *proc) output() string {
	b, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n")
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM (actgate's processes shut down gracefully on it) and waits; a process
// that does not exit within 20 s is killed and that is an error.
func (p *proc) stop() error {
	defer p.f.Close()
	if p.exited() {
		if p.err != nil {
			return fmt.Errorf("%s exited early: %w\n%s", p.name, p.err, p.output())
		}
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if p.err != nil {
			return fmt.Errorf("%s exited with %w after SIGTERM\n%s", p.name, p.err, p.output())
		}
		return nil
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not stop within 20 s of SIGTERM", p.name)
	}
}

// waitFor polls cond every 20 ms until it holds, the process exits or d passes.
func waitFor(p *proc, d time.Duration, what string, cond func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if p.exited() {
			return fmt.Errorf("%s exited before %s: %v\n%s", p.name, what, p.err, p.output())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %s: %w\n%s", p.name, what, err, p.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func dialTCP(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		_ = c.Close()
	}
	return err
}

func dialTLS(addr string, roots *x509.CertPool) error {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr,
		&tls.Config{RootCAs: roots, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
	if err == nil {
		_ = c.Close()
	}
	return err
}

// freeAddr returns host:port with a port free a moment ago.
func freeAddr(host string) (string, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// loopbackHost refuses anything but a loopback IP: the generator, its upstreams and the sinks
// it starts never listen elsewhere.
func loopbackHost(h string) error {
	ip := net.ParseIP(h)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("-listen %q: only a loopback IP (127.0.0.1, ::1) is accepted", h)
	}
	return nil
}

var errNotYet = errors.New("not yet")
