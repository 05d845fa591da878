package node

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// createdCandidates are the folders outside the run's folder that the node's parts create when
// missing; Up records which were missing, and Down removes those.
var createdCandidates = append(slices.Clone(outsideDirs),
	"/var/lib/kubelet/device-plugins", "/var/lib/cni/results", "/var/lib/cni/networks", "/run/containerd/s")

// Down tears the node down and puts the machine back as Up found it: the kubelet stopped
// first (so it recreates nothing), every pod sandbox stopped and removed through containerd
// (so CNI DEL releases its address and veth), kube-proxy's rules removed (`kube-proxy
// --cleanup`), containerd and the control plane stopped by PID, mounts under the run's folder
// unmounted, the cgroups removed, the bridge, its route and the guard chain deleted, the
// sysctls restored, and what the kubelet, containerd and libcni write outside the run's
// folder removed. The run's folder itself (logs) is left. It goes on past errors and returns
// them all.
func (n *Node) Down() error {
	if n == nil || n.st == nil {
		return nil
	}
	log := n.log
	if log == nil {
		log = io.Discard
	}
	err := down(n.st, log)
	if n.lock != nil {
		_ = n.lock.Close() // releases the machine's node lock
		n.lock = nil
	}
	return err
}

// DownDir tears down the node whose run's folder is dir (hack/node.sh down DIR).
func DownDir(dir string, log io.Writer) error {
	st, err := loadState(dir)
	if err != nil {
		return err
	}
	return down(st, log)
}

func down(st *state, log io.Writer) error {
	d := &teardown{st: st, log: log}
	d.stopProcesses()
	// Mounts under the run's folder, deepest first.
	d.fail(unmountUnder(st.Dir))
	// Cgroups: whatever still runs in them belongs to the node's pods.
	for _, cg := range st.Cgroups {
		d.fail(removeCgroup(cg))
	}
	d.restoreNetwork()
	d.removeOutside()
	return errors.Join(d.errs...)
}

// teardown is one Down in progress: it goes on past errors and collects them.
type teardown struct {
	st   *state
	log  io.Writer
	errs []error
}

func (d *teardown) fail(err error) {
	if err != nil {
		d.errs = append(d.errs, err)
		fmt.Fprintf(d.log, "node: down: %v\n", err)
	}
}

func (d *teardown) proc(name string) *proc {
	for _, p := range d.st.Procs {
		if p.Name == name {
			return p
		}
	}
	return nil
}

func (d *teardown) stop(name string, grace time.Duration) {
	if p := d.proc(name); p != nil && p.stop(grace) {
		fmt.Fprintf(d.log, "node: down: %s did not stop on SIGTERM within %s; killed\n", name, grace)
	}
}

// stopProcesses stops the kubelet, removes the pod sandboxes, stops kube-proxy (and removes
// its rules), containerd, its shims and the control plane.
func (d *teardown) stopProcesses() {
	st := d.st
	d.stop("kubelet", 20*time.Second)
	d.removeSandboxes()
	d.stop("kube-proxy", 10*time.Second)
	if d.proc("kube-proxy") != nil {
		if out, err := exec.Command(filepath.Join(st.NodeBinDir, "kube-proxy"), "--cleanup").CombinedOutput(); err != nil {
			d.fail(fmt.Errorf("kube-proxy --cleanup: %w: %s", err, lastLines(string(out), 5)))
		}
	}
	d.stop(containerdName, 15*time.Second)
	if st.Socket != "" {
		for _, pid := range shimsOf(st.Socket) {
			fmt.Fprintf(d.log, "node: down: killing containerd shim %d left behind\n", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		// A killed shim, or one its sandbox's removal ended, takes a moment to exit.
		for deadline := time.Now().Add(5 * time.Second); len(shimsOf(st.Socket)) > 0 && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
		}
		if left := shimsOf(st.Socket); len(left) > 0 {
			d.fail(fmt.Errorf("containerd shims %v still running 5 s after SIGKILL", left))
		}
	}
	for _, name := range []string{"kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"} {
		d.stop(name, 15*time.Second)
	}
	for _, p := range st.Procs {
		if p.alive() {
			d.fail(fmt.Errorf("%s (pid %d) still running; killing it", p.Name, p.PID))
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
			waitGone(p, 5*time.Second)
		}
	}
}

// removeSandboxes stops and removes every pod sandbox through containerd, so the CNI plugins
// release what they set up. A containerd that died with its caller is started again for it.
func (d *teardown) removeSandboxes() {
	st := d.st
	confFile := filepath.Join(st.Dir, containerdName, "config.toml")
	if _, err := os.Stat(confFile); err != nil || st.Socket == "" {
		return
	}
	var temp *proc
	if p := d.proc(containerdName); p == nil || !p.alive() {
		var err error
		temp, err = startProc("containerd-cleanup", containerdName, filepath.Join(st.Dir, "logs", "containerd-cleanup.log"), false, nil, "--config", confFile)
		d.fail(err)
		if temp != nil {
			waitSocket(st.Socket, 30*time.Second)
		}
	}
	crictl := filepath.Join(st.NodeBinDir, "crictl")
	if out, err := exec.Command(crictl, "--runtime-endpoint", "unix://"+st.Socket, "--timeout", "60s", "rmp", "-fa").CombinedOutput(); err != nil {
		d.fail(fmt.Errorf("crictl rmp -fa: %w: %s", err, strings.TrimSpace(string(out))))
	}
	if temp != nil {
		temp.stop(10 * time.Second)
	}
}

// restoreNetwork deletes the guard chain, any nft table that did not exist before (iptables-nft
// creates tables when kube-proxy or the guard first writes to them) and the bridge, and writes
// back the sysctls.
func (d *teardown) restoreNetwork() {
	st := d.st
	if st.Guard {
		_ = run("iptables", "-w", "-D", "FORWARD", "-j", guardChain)
		_ = run("iptables", "-w", "-F", guardChain)
		d.fail(run("iptables", "-w", "-X", guardChain))
	}
	before := tablesOf(st.Ruleset)
	if out, err := exec.Command("nft", "list", "tables").Output(); err == nil {
		for _, t := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if t = strings.TrimSpace(t); t != "" && !slices.Contains(before, t) {
				d.fail(run("nft", append([]string{"delete"}, strings.Fields(t)...)...))
			}
		}
	}
	if st.Bridge {
		d.fail(run("ip", "link", "del", Bridge))
	}
	for k, v := range st.Sysctls {
		b, err := os.ReadFile("/proc/sys/" + k)
		if err == nil && strings.TrimSpace(string(b)) != v {
			d.fail(os.WriteFile("/proc/sys/"+k, []byte(v), 0o644))
		}
	}
}

// removeOutside removes what the parts write outside the run's folder.
func (d *teardown) removeOutside() {
	st := d.st
	created := slices.Clone(st.Created)
	sort.Strings(created)
	for _, dir := range created {
		d.fail(os.RemoveAll(dir))
	}
	if entries, err := os.ReadDir("/var/log/containers"); err == nil {
		for _, e := range entries {
			p := filepath.Join("/var/log/containers", e.Name())
			if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, st.Dir+"/") {
				d.fail(os.Remove(p))
			}
		}
	}
	if entries, err := os.ReadDir("/var/lib/cni/results"); err == nil {
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), cniNetwork+"-") {
				d.fail(os.Remove(filepath.Join("/var/lib/cni/results", e.Name())))
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join(stateDir, st.Name)); err == nil && string(b) == st.Dir {
		d.fail(os.Remove(filepath.Join(stateDir, st.Name)))
		_ = os.Remove(stateDir) // only when empty
	}
}

// reclaim tears down a node of this name left by a process that died without Down (its
// processes died with it), and refuses when that node is still running.
func reclaim(name string, log io.Writer) error {
	b, err := os.ReadFile(filepath.Join(stateDir, name))
	if errors.Is(err, os.ErrNotExist) {
		if _, err := os.Stat("/sys/class/net/" + Bridge); err == nil {
			return fmt.Errorf("node: a link %s exists and no run owns it: delete it (ip link del %s) after checking nothing uses it", Bridge, Bridge)
		}
		return nil
	}
	if err != nil {
		return err
	}
	dir := string(b)
	st, err := loadState(dir)
	if err != nil {
		return fmt.Errorf("node: %s names the run at %s, whose state cannot be read (%v): tear it down by hand", filepath.Join(stateDir, name), dir, err)
	}
	for _, p := range st.Procs {
		if p.alive() {
			return fmt.Errorf("node: node %s is already up at %s (%s pid %d): hack/node.sh down %s", name, dir, p.Name, p.PID, dir)
		}
	}
	fmt.Fprintf(log, "node: cleaning up after an earlier run at %s that ended without tearing down\n", dir)
	return down(st, log)
}

func waitSocket(path string, d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// shimsOf lists the containerd shims serving the containerd at socket.
func shimsOf(socket string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 0 && strings.Contains(filepath.Base(args[0]), "containerd-shim") && slices.Contains(args, socket) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// unmountUnder detaches every mount at or below dir, deepest first.
func unmountUnder(dir string) error {
	var under []string
	for _, m := range mountPoints() {
		if m == dir || strings.HasPrefix(m, dir+"/") {
			under = append(under, m)
		}
	}
	sort.Slice(under, func(i, j int) bool { return len(under[i]) > len(under[j]) })
	var errs []error
	for _, m := range under {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
		}
	}
	return errors.Join(errs...)
}

// removeCgroup removes cg and the cgroups below it, deepest first, killing what still runs
// in them.
func removeCgroup(cg string) error {
	var dirs []string
	_ = filepath.WalkDir(cg, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	var errs []error
	for _, d := range dirs {
		var err error
		for range 50 {
			if err = syscall.Rmdir(d); err == nil || errors.Is(err, syscall.ENOENT) {
				err = nil
				break
			}
			for _, pid := range cgroupProcs(d) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("rmdir cgroup %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

func cgroupProcs(dir string) []int {
	f, err := os.Open(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	defer f.Close()
	var pids []int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if pid, err := strconv.Atoi(strings.TrimSpace(sc.Text())); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// tablesOf lists the "table FAMILY NAME" lines of an `nft list ruleset`.
func tablesOf(ruleset string) []string {
	var t []string
	for _, line := range strings.Split(ruleset, "\n") {
		if strings.HasPrefix(line, "table ") {
			t = append(t, strings.TrimSuffix(strings.TrimSpace(line), " {"))
		}
	}
	return t
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// Start brings a node up for a test under a folder of its own and tears it down when the
// test ends; it fails the test, with the reason, when the node cannot come up. It never
// skips: a machine that cannot run the node fails the suite.
func Start(t testing.TB, opts Options) *Node {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	n, err := Up(t.Context(), opts)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		if err := n.Down(); err != nil {
			t.Errorf("node: down: %v", err)
		}
	})
	return n
}
