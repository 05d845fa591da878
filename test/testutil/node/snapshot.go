package node

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Snapshot is the part of the machine a node run changes: network links and routes, the
// netfilter ruleset, mounts, the sysctls the node's parts write, cgroups, the files the
// kubelet, containerd and libcni write outside the run's folder whatever their configuration
// says, and the node's processes. Down restores it; TakeSnapshot before Up and after Down
// must compare equal (Diff) for a run to have left the machine as it was.
type Snapshot struct {
	Links   []string
	Routes  []string
	Ruleset string
	Mounts  []string
	Sysctls map[string]string
	Cgroups []string
	Files   []string
	Procs   []string
}

// sysctls are the kernel settings the bridge plugin (ip_forward), the kubelet (its "kernel
// defaults", unless protectKernelDefaults) and kube-proxy may change.
var sysctls = []string{
	"net/ipv4/ip_forward",
	"net/ipv4/conf/all/route_localnet",
	"net/bridge/bridge-nf-call-iptables",
	"net/bridge/bridge-nf-call-ip6tables",
	"net/netfilter/nf_conntrack_max",
	"vm/overcommit_memory",
	"vm/panic_on_oom",
	"kernel/panic",
	"kernel/panic_on_oops",
	"kernel/keys/root_maxkeys",
	"kernel/keys/root_maxbytes",
}

// outsideDirs are the folders outside the run's folder that node parts write into.
var outsideDirs = []string{
	"/var/lib/kubelet", "/var/log/containers", "/var/log/pods", "/var/lib/cni", "/etc/cni",
	"/opt/cni", "/run/containerd", "/var/lib/containerd", "/opt/containerd", "/run/netns",
	"/var/run/netns", "/etc/kubernetes", "/run/runc",
}

// nodeProcs are the command names of the node's own processes and the pods' sandboxes that
// nothing else on a test machine runs. etcd and kube-apiserver are counted only when they
// carry procMarker: envtest tests run their own beside a node.
var nodeProcs = []string{"kube-controller", "kube-scheduler", "kubelet", "kube-proxy", containerdName,
	"containerd-shim", "containerd-shim-runc-v2", "runc", "pause"}

// procMarker is in the environment of every process the node starts (and of the shims
// containerd starts).
const procMarker = "ACTGATE_NODE="

// TakeSnapshot reads the machine's current state.
func TakeSnapshot() Snapshot {
	s := Snapshot{Sysctls: map[string]string{}}
	s.Links = lines("ip", "-o", "link", "show")
	for i, l := range s.Links {
		// "3: name: <FLAGS> ..." → "name"
		if f := strings.Fields(l); len(f) > 1 {
			s.Links[i] = strings.TrimSuffix(strings.SplitN(f[1], "@", 2)[0], ":")
		}
	}
	s.Routes = lines("ip", "-4", "route", "show", "table", "all")
	if out, err := exec.Command("nft", "list", "ruleset").Output(); err == nil {
		s.Ruleset = string(out)
	}
	s.Mounts = mountPoints()
	for _, k := range sysctls {
		if b, err := os.ReadFile("/proc/sys/" + k); err == nil {
			s.Sysctls[k] = strings.TrimSpace(string(b))
		}
	}
	for _, m := range cgroupMounts() {
		entries, _ := os.ReadDir(m)
		for _, e := range entries {
			if e.IsDir() {
				s.Cgroups = append(s.Cgroups, filepath.Join(m, e.Name()))
			}
		}
	}
	for _, d := range outsideDirs {
		_ = filepath.WalkDir(d, func(p string, _ fs.DirEntry, err error) error {
			if err == nil {
				s.Files = append(s.Files, p)
			}
			return nil
		})
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid := e.Name()
		n, err := strconv.Atoi(pid)
		// A zombie has exited: only its parent's reaping (init's, for a daemon) is left.
		if err != nil || exited(n) {
			continue
		}
		b, err := os.ReadFile("/proc/" + pid + "/comm")
		if err != nil {
			continue
		}
		comm := strings.TrimSpace(string(b))
		if slices.Contains(nodeProcs, comm) {
			s.Procs = append(s.Procs, pid+" "+comm)
		} else if env, err := os.ReadFile("/proc/" + pid + "/environ"); err == nil && (bytes.HasPrefix(env, []byte(procMarker)) || bytes.Contains(env, []byte("\x00"+procMarker))) {
			s.Procs = append(s.Procs, pid+" "+comm)
		}
	}
	for _, l := range [][]string{s.Links, s.Routes, s.Mounts, s.Cgroups, s.Files, s.Procs} {
		sort.Strings(l)
	}
	return s
}

// Diff lists what differs from before to s, one line each ("+ link actgate0", "- mount /x",
// "sysctl net/ipv4/ip_forward 0 → 1"); empty when equal.
func (s Snapshot) Diff(before Snapshot) []string {
	var d []string
	set := func(kind string, a, b []string) {
		for _, x := range b {
			if !slices.Contains(a, x) {
				d = append(d, "+ "+kind+" "+x)
			}
		}
		for _, x := range a {
			if !slices.Contains(b, x) {
				d = append(d, "- "+kind+" "+x)
			}
		}
	}
	set("link", before.Links, s.Links)
	set("route", before.Routes, s.Routes)
	set("mount", before.Mounts, s.Mounts)
	set("cgroup", before.Cgroups, s.Cgroups)
	set("file", before.Files, s.Files)
	set("process", before.Procs, s.Procs)
	if before.Ruleset != s.Ruleset {
		d = append(d, fmt.Sprintf("netfilter ruleset changed:\n--- before\n%s\n--- after\n%s", before.Ruleset, s.Ruleset))
	}
	for _, k := range sysctls {
		if before.Sysctls[k] != s.Sysctls[k] {
			d = append(d, fmt.Sprintf("sysctl %s %s → %s", k, before.Sysctls[k], s.Sysctls[k]))
		}
	}
	return d
}

func lines(name string, args ...string) []string {
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		return nil
	}
	var l []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			l = append(l, line)
		}
	}
	return l
}

// mountPoints are the mount points of /proc/self/mountinfo.
func mountPoints() []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var m []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 4 {
			m = append(m, unescapeMount(fields[4]))
		}
	}
	return m
}

func unescapeMount(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}

// cgroupMounts are the mount points of every cgroup (v1) and cgroup2 hierarchy.
func cgroupMounts() []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var m []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		_, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		fields := strings.Fields(line)
		if typ := strings.Fields(post); len(typ) > 0 && (typ[0] == "cgroup" || typ[0] == "cgroup2") && len(fields) > 4 {
			m = append(m, unescapeMount(fields[4]))
		}
	}
	return m
}
