package testutil

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Process is an actgate process a test runs (serve, authority, sidecar), its output collected
// while it runs; it is killed when the test ends if it is still running.
type Process struct {
	Cmd *exec.Cmd
	// Out is what the process wrote to stderr, and to stdout too when started combined.
	Out  *Buffer
	done chan struct{}
	err  error
}

// StartProcess runs bin with args and the environment plus env. combined sends stdout to Out
// too; otherwise stdout is collected apart and not shown.
func StartProcess(t testing.TB, bin string, args, env []string, combined bool) *Process {
	t.Helper()
	p := &Process{Out: &Buffer{}, done: make(chan struct{})}
	p.Cmd = exec.Command(bin, args...)
	p.Cmd.Env = append(os.Environ(), env...)
	p.Cmd.Stdout, p.Cmd.Stderr = &Buffer{}, p.Out
	if combined {
		p.Cmd.Stdout = p.Out
	}
	if err := p.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.Cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.Cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// name is the process's command for messages: "actgate serve".
func (p *Process) name() string {
	if len(p.Cmd.Args) > 1 {
		return "actgate " + p.Cmd.Args[1]
	}
	return p.Cmd.Path
}

// Alive reports whether the process is still running.
func (p *Process) Alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// WaitFor polls cond every 20 ms until it holds; the test fails if the process exits first or
// d passes.
func (p *Process) WaitFor(t testing.TB, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		select {
		case <-p.done:
			t.Fatalf("%s exited: %v\n%s", p.name(), p.err, p.Out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not start:\n%s", p.name(), p.Out.String())
		}
	}
}

// Wait waits up to d for the process to exit and returns how it exited; the test fails if it
// does not.
func (p *Process) Wait(t testing.TB, d time.Duration) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(d):
		t.Fatalf("%s did not exit:\n%s", p.name(), p.Out.String())
		return nil
	}
}

// WaitKilled waits for the process to die by SIGKILL (a failpoint's kill).
func (p *Process) WaitKilled(t testing.TB) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s still running:\n%s", p.name(), p.Out.String())
	}
	var ee *exec.ExitError
	if !errors.As(p.err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("%s did not die by SIGKILL: %v\n%s", p.name(), p.err, p.Out.String())
	}
}

// Stop ends the process with SIGTERM (a graceful exit), waits and returns how it exited; nil
// when it had already exited.
func (p *Process) Stop(t testing.TB) error {
	t.Helper()
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
		return p.err
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not stop:\n%s", p.name(), p.Out.String())
		return nil
	}
}

// ServeProcess is one `actgate serve` process.
type ServeProcess struct {
	*Process
	// Base is the gate's base URL, read from its endpoint file.
	Base string
}

// StartServe runs bin with args (an `actgate serve` command line, env added, e.g.
// ACTGATE_FAILPOINT) and waits until it serves: until it wrote endpointFile (the data dir's
// gateconfig.EndpointFile).
func StartServe(t testing.TB, bin string, args []string, endpointFile string, env ...string) *ServeProcess {
	t.Helper()
	_ = os.Remove(endpointFile) // a killed process leaves its own behind
	p := &ServeProcess{Process: StartProcess(t, bin, args, env, false)}
	p.WaitFor(t, 30*time.Second, func() bool {
		b, err := os.ReadFile(endpointFile)
		p.Base = strings.TrimSpace(string(b))
		return err == nil && len(bytes.TrimSpace(b)) > 0
	})
	return p
}
