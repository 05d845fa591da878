package node

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is a process the node started, identified by PID and its start time (so a recycled
// PID is never signalled).
type proc struct {
	Name      string `json:"name"`
	PID       int    `json:"pid"`
	StartTime uint64 `json:"startTime"`
	Log       string `json:"log"`
}

// startProc runs bin with args, output to the log file, in its own process group. Unless
// detach, it dies with the caller (PR_SET_PDEATHSIG), so a killed test leaves no node running.
func startProc(name, bin, logFile string, detach bool, env []string, args ...string) (*proc, error) {
	f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if !detach {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{Name: name, PID: cmd.Process.Pid, Log: logFile}
	p.StartTime, _ = startTime(p.PID)
	// Reap it when it exits; a detached process is reaped by whoever inherits it.
	go func() { _ = cmd.Wait() }()
	return p, nil
}

// statFields are the fields of /proc/PID/stat after the command name (the state first), nil
// when the process is gone or the file is malformed.
func statFields(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	if f := strings.Fields(s[i+1:]); len(f) >= 20 {
		return f
	}
	return nil
}

// startTime is field 22 of /proc/PID/stat.
func startTime(pid int) (uint64, error) {
	f := statFields(pid)
	if f == nil {
		return 0, fmt.Errorf("/proc/%d/stat: no such process or malformed", pid)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// exited reports whether pid has exited: gone, or a zombie its parent has not reaped yet.
func exited(pid int) bool {
	f := statFields(pid)
	return f == nil || f[0] == "Z" || f[0] == "X"
}

// alive reports whether p still runs: same PID and start time, and not a zombie.
func (p *proc) alive() bool {
	if exited(p.PID) {
		return false
	}
	st, err := startTime(p.PID)
	return err == nil && (p.StartTime == 0 || st == p.StartTime)
}

// stop sends SIGTERM, waits up to grace, then SIGKILL. It reports whether the process had to
// be killed.
func (p *proc) stop(grace time.Duration) (killed bool) {
	if !p.alive() {
		return false
	}
	_ = syscall.Kill(p.PID, syscall.SIGTERM)
	if waitGone(p, grace) {
		return false
	}
	_ = syscall.Kill(p.PID, syscall.SIGKILL)
	waitGone(p, 10*time.Second)
	return true
}

func waitGone(p *proc, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !p.alive() {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return !p.alive()
}

// logTail is the end of a log file, for error messages.
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
