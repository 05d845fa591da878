package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/actgate/actgate/test/envtest"
)

// The node's network. Pods get addresses of PodCIDR on the bridge Bridge, whose own address
// NodeIP is also the node's address (the API server, the kubelet and the Services' endpoints
// on the host listen there), so nothing binds to an address reachable from outside the
// machine. Services get ClusterIPs of ServiceCIDR, routed to the bridge so that traffic to an
// unknown ClusterIP stays on the machine too.
const (
	Bridge      = "actgate0"
	PodCIDR     = "10.209.0.0/24"
	NodeIP      = "10.209.0.1"
	ServiceCIDR = "10.209.1.0/24"
	// KubernetesServiceIP is the ClusterIP of the default/kubernetes Service.
	KubernetesServiceIP = "10.209.1.1"
	// PauseImage is the sandbox image Up builds and imports.
	PauseImage = "actgate.test/pause:1"
	// DefaultName is the node's name and its cgroup root.
	DefaultName = "actgate-node"
	// containerdName is containerd's program, its process's name and its folder in the run's
	// folder.
	containerdName = "containerd"
	// cniNetwork names the CNI network (libcni's cache files start with it).
	cniNetwork = "actgate-node"
	// guardChain is the filter chain that drops forwarded pod traffic not going back to the
	// bridge: no packet of a pod leaves the machine.
	guardChain = "ACTGATE-NODE-GUARD"
	// stateDir holds one pointer per node name to the folder of the run that owns it, so a run
	// whose process died is found and cleaned up by the next Up.
	stateDir = "/run/actgate-node"
)

// Options configure Up.
type Options struct {
	// Dir is the run's folder; everything the node writes that can be configured goes there.
	Dir string
	// Name is the node's name and cgroup root (DefaultName when empty).
	Name string
	// ControlPlaneBinDir holds etcd, kube-apiserver, kubectl and helm (envtest.BinDir when
	// empty: KUBEBUILDER_ASSETS or hack/envtest-bins.sh).
	ControlPlaneBinDir string
	// NodeBinDir holds kubelet, kube-scheduler, kube-controller-manager, kube-proxy and crictl
	// (ACTGATE_NODE_BINS or hack/node-bins.sh when empty).
	NodeBinDir string
	// Log receives progress lines (os.Stderr when nil).
	Log io.Writer
	// Detach leaves the node running after the calling process exits (hack/node.sh up);
	// otherwise every process of it dies with the caller.
	Detach bool
	// AuthenticationConfig is the path of an AuthenticationConfiguration file passed to the
	// kube-apiserver as --authentication-config (structured authentication: JWT issuers whose
	// ID tokens it accepts, e.g. idp.Provider.WriteAuthenticationConfig); empty: none. Its
	// issuers must be reachable from the machine (HostIP).
	AuthenticationConfig string
}

// Node is a running one-node cluster.
type Node struct {
	// Dir is the run's folder; Kubeconfig is an admin (system:masters) kubeconfig in it.
	Dir, Kubeconfig string
	// Name is the node's name.
	Name string
	// ControlPlaneBinDir and NodeBinDir are where the binaries came from.
	ControlPlaneBinDir, NodeBinDir string
	// ContainerdSocket is containerd's socket.
	ContainerdSocket string
	// CAFile is the cluster CA; APIServer the API server's URL.
	CAFile, APIServer string
	// Before is the machine as Up found it once it held the machine lock: what Down must
	// leave behind (another run's node, up while this one waited, is not in it).
	Before Snapshot

	st   *state
	pki  *pki
	log  io.Writer
	lock *os.File // the machine's node lock (lockFile), held until Down
}

// state is what Down needs, saved in Dir/state.json as Up goes, so Down can undo a partial Up
// and run from another process (hack/node.sh down).
type state struct {
	Name        string            `json:"name"`
	Dir         string            `json:"dir"`
	Procs       []*proc           `json:"procs"`
	Sysctls     map[string]string `json:"sysctls"`
	Ruleset     string            `json:"ruleset"`
	Bridge      bool              `json:"bridge"`
	Guard       bool              `json:"guard"`
	Cgroups     []string          `json:"cgroups"`
	Created     []string          `json:"created"` // folders outside Dir that did not exist before
	Socket      string            `json:"socket"`
	NodeBinDir  string            `json:"nodeBinDir"`
	ControlBins string            `json:"controlBins"`
}

func (s *state) save() error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(s.Dir, "state.json"), b, 0o600)
}

func loadState(dir string) (*state, error) {
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return nil, err
	}
	var s state
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s/state.json: %w", dir, err)
	}
	return &s, nil
}

// Up brings a node up under opts.Dir: containerd, etcd, kube-apiserver, controller-manager,
// scheduler, kubelet and kube-proxy, with certificates made for this run, and waits until
// the node is Ready. It needs root. On error it tears down what it started.
func Up(ctx context.Context, opts Options) (n *Node, err error) {
	start := time.Now()
	if opts.Name == "" {
		opts.Name = DefaultName
	}
	if opts.Log == nil {
		opts.Log = os.Stderr
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("node: needs root (containerd, the kubelet, CNI and cgroups)")
	}
	if opts.Dir, err = filepath.Abs(opts.Dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, err
	}
	logf := func(format string, a ...any) {
		fmt.Fprintf(opts.Log, "node: %s: "+format+"\n", append([]any{time.Since(start).Round(time.Millisecond)}, a...)...)
	}
	if err := ensurePackages(ctx, logf); err != nil {
		return nil, err
	}
	if opts.ControlPlaneBinDir == "" {
		if opts.ControlPlaneBinDir, err = envtest.BinDir(ctx, opts.Log); err != nil {
			return nil, err
		}
	}
	if opts.NodeBinDir == "" {
		if opts.NodeBinDir, err = NodeBinDir(ctx, opts.Log); err != nil {
			return nil, err
		}
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kubectl", "helm"} {
		if err := executable(filepath.Join(opts.ControlPlaneBinDir, b)); err != nil {
			return nil, err
		}
	}
	for _, b := range []string{"kubelet", "kube-scheduler", "kube-controller-manager", "kube-proxy", "crictl"} {
		if err := executable(filepath.Join(opts.NodeBinDir, b)); err != nil {
			return nil, err
		}
	}
	lock, err := lockMachine(ctx, lockFile, logf)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = lock.Close()
		}
	}()
	if err := reclaim(opts.Name, opts.Log); err != nil {
		return nil, err
	}

	before := TakeSnapshot()
	st := &state{Name: opts.Name, Dir: opts.Dir, Sysctls: before.Sysctls, Ruleset: before.Ruleset,
		NodeBinDir: opts.NodeBinDir, ControlBins: opts.ControlPlaneBinDir}
	for _, d := range createdCandidates {
		if _, err := os.Lstat(d); errors.Is(err, os.ErrNotExist) {
			st.Created = append(st.Created, d)
		}
	}
	if err := st.save(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(stateDir, opts.Name), []byte(opts.Dir), 0o600); err != nil {
		return nil, err
	}
	n = &Node{Dir: opts.Dir, Name: opts.Name, ControlPlaneBinDir: opts.ControlPlaneBinDir, NodeBinDir: opts.NodeBinDir,
		Kubeconfig: filepath.Join(opts.Dir, "admin.kubeconfig"), Before: before, st: st, log: opts.Log, lock: lock}
	defer func() {
		if err != nil {
			err = fmt.Errorf("node: up: %w", err)
			if derr := n.Down(); derr != nil {
				err = fmt.Errorf("%w (and tearing down: %v)", err, derr)
			}
			n = nil
		}
	}()
	if err := n.up(ctx, opts, logf); err != nil {
		return n, err
	}
	logf("node %s Ready (API server %s, pods %s, services %s)", opts.Name, n.APIServer, PodCIDR, ServiceCIDR)
	return n, nil
}

// bringUp is one Up in progress: what its steps share.
type bringUp struct {
	n    *Node
	ctx  context.Context
	opts Options
	logf func(string, ...any)
	pki  *pki
	// saKey and saPub sign and verify service-account tokens.
	saKey, saPub string
	// apiCert serves the API server; kubeletServing the kubelet; apiToKubelet is the API
	// server's client certificate at the kubelet.
	apiCert, kubeletServing, apiToKubelet certPair
	apiPort                               int
}

func (b *bringUp) path(p ...string) string {
	return filepath.Join(append([]string{b.n.Dir}, p...)...)
}

func (n *Node) up(ctx context.Context, opts Options, logf func(string, ...any)) error {
	b := &bringUp{n: n, ctx: ctx, opts: opts, logf: logf}
	for _, d := range []string{"logs", "pki", "etcd", containerdName, "cni/net.d", "cni/ipam", "kubelet/root", "kubelet/pod-logs", "kubelet/volume-plugins", "images", "home"} {
		if err := os.MkdirAll(b.path(d), 0o700); err != nil {
			return err
		}
	}
	for _, step := range []func() error{b.network, b.cgroups, b.certificates, b.containerd, b.controlPlane, b.kubeletAndProxy, b.ready} {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// network makes the bridge with the node's address, routes ClusterIPs to it, and adds the
// guard that keeps pod traffic on the machine.
func (b *bringUp) network() error {
	st := b.n.st
	if err := run("ip", "link", "add", Bridge, "type", "bridge"); err != nil {
		return err
	}
	st.Bridge = true
	if err := st.save(); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"addr", "add", NodeIP + "/24", "dev", Bridge},
		{"link", "set", Bridge, "up"},
		{"route", "add", ServiceCIDR, "dev", Bridge, "src", NodeIP},
	} {
		if err := run("ip", args...); err != nil {
			return err
		}
	}
	if err := run("iptables", "-w", "-N", guardChain); err != nil {
		return err
	}
	st.Guard = true
	if err := st.save(); err != nil {
		return err
	}
	if err := run("iptables", "-w", "-A", guardChain, "-i", Bridge, "!", "-o", Bridge, "-j", "DROP"); err != nil {
		return err
	}
	return run("iptables", "-w", "-I", "FORWARD", "1", "-j", guardChain)
}

// cgroups makes the kubelet's cgroupRoot in every hierarchy, cpuset filled from the root.
func (b *bringUp) cgroups() error {
	st := b.n.st
	for _, m := range cgroupMounts() {
		cg := filepath.Join(m, b.n.Name)
		if err := os.Mkdir(cg, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("cgroup %s: %w", cg, err)
		}
		st.Cgroups = append(st.Cgroups, cg)
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(m, f)); err == nil {
				if err := os.WriteFile(filepath.Join(cg, f), v, 0o644); err != nil {
					return fmt.Errorf("cgroup %s: %w", cg, err)
				}
			}
		}
	}
	return st.save()
}

// certificates makes the run's CA, every serving and client certificate, the service-account
// key and the kubeconfigs.
func (b *bringUp) certificates() error {
	n := b.n
	p, err := newPKI(b.path("pki"))
	if err != nil {
		return err
	}
	b.pki, n.pki, n.CAFile = p, p, p.CAFile()
	if b.saKey, b.saPub, err = p.serviceAccountKey(); err != nil {
		return err
	}
	nodeIP := net.ParseIP(NodeIP)
	if b.apiCert, err = p.issue("apiserver", "kube-apiserver", nil,
		[]string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"},
		[]net.IP{nodeIP, net.ParseIP(KubernetesServiceIP), net.ParseIP("127.0.0.1")}); err != nil {
		return err
	}
	if b.kubeletServing, err = p.issue("kubelet-serving", "system:node:"+n.Name, []string{"system:nodes"}, []string{n.Name}, []net.IP{nodeIP}); err != nil {
		return err
	}
	if b.apiToKubelet, err = p.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}, nil, nil); err != nil {
		return err
	}
	if b.apiPort, err = freePort(NodeIP); err != nil {
		return err
	}
	n.APIServer = fmt.Sprintf("https://%s:%d", NodeIP, b.apiPort)
	for _, u := range []struct{ file, cn, org string }{
		{"admin.kubeconfig", "actgate-node-admin", "system:masters"},
		{"controller-manager.kubeconfig", "system:kube-controller-manager", ""},
		{"scheduler.kubeconfig", "system:kube-scheduler", ""},
		{"kube-proxy.kubeconfig", "system:kube-proxy", ""},
		{"kubelet.kubeconfig", "system:node:" + n.Name, "system:nodes"},
	} {
		var orgs []string
		if u.org != "" {
			orgs = []string{u.org}
		}
		c, err := p.issue(strings.TrimSuffix(u.file, ".kubeconfig"), u.cn, orgs, nil, nil)
		if err != nil {
			return err
		}
		if err := p.kubeconfig(b.path(u.file), n.APIServer, c); err != nil {
			return err
		}
	}
	return nil
}

// containerd builds the sandbox image, starts containerd and imports the image.
func (b *bringUp) containerd() error {
	n := b.n
	pauseTar := b.path("images", "pause.tar")
	if err := buildPause(b.ctx, b.path("images"), pauseTar); err != nil {
		return err
	}
	n.ContainerdSocket = b.path(containerdName, "containerd.sock")
	n.st.Socket = n.ContainerdSocket
	if err := os.WriteFile(b.path(containerdName, "config.toml"), []byte(containerdConfig(n.Dir)), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(b.path("cni", "net.d", "10-actgate.conflist"), []byte(cniConfig(n.Dir)), 0o600); err != nil {
		return err
	}
	if err := n.start(b.opts, containerdName, containerdName, "--config", b.path(containerdName, "config.toml")); err != nil {
		return err
	}
	if err := n.waitFor(b.ctx, containerdName, 30*time.Second, func() error {
		_, err := n.ctr(b.ctx, "version")
		return err
	}); err != nil {
		return err
	}
	if _, err := n.ImportImage(b.ctx, pauseTar); err != nil {
		return err
	}
	b.logf("containerd up, %s imported", PauseImage)
	return nil
}

// controlPlane starts etcd and the API server, waits for /readyz, then starts the
// controller-manager and the scheduler.
func (b *bringUp) controlPlane() error {
	n, opts, p := b.n, b.opts, b.pki
	etcdPort, err := freePort("127.0.0.1")
	if err != nil {
		return err
	}
	peerPort, err := freePort("127.0.0.1")
	if err != nil {
		return err
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	if err := n.start(opts, "etcd", filepath.Join(opts.ControlPlaneBinDir, "etcd"), "--name", "node", "--data-dir", b.path("etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL, "--initial-cluster", "node="+peerURL,
		"--unsafe-no-fsync", "--log-level", "warn"); err != nil {
		return err
	}
	ca := p.CAFile()
	apiArgs := []string{
		"--etcd-servers", etcdURL,
		"--bind-address", NodeIP, "--advertise-address", NodeIP, "--secure-port", strconv.Itoa(b.apiPort),
		"--cert-dir", b.path("pki", "apiserver-generated"),
		"--tls-cert-file", b.apiCert.CertFile, "--tls-private-key-file", b.apiCert.KeyFile,
		"--client-ca-file", ca,
		"--service-account-key-file", b.saPub, "--service-account-signing-key-file", b.saKey,
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range", ServiceCIDR,
		"--authorization-mode", "Node,RBAC", "--enable-admission-plugins", "NodeRestriction",
		"--kubelet-client-certificate", b.apiToKubelet.CertFile, "--kubelet-client-key", b.apiToKubelet.KeyFile,
		"--kubelet-certificate-authority", ca, "--kubelet-preferred-address-types", "InternalIP",
		"--allow-privileged", "--profiling=false"}
	if opts.AuthenticationConfig != "" {
		path, err := filepath.Abs(opts.AuthenticationConfig)
		if err != nil {
			return err
		}
		apiArgs = append(apiArgs, "--authentication-config", path)
	}
	if err := n.start(opts, "kube-apiserver", filepath.Join(opts.ControlPlaneBinDir, "kube-apiserver"), apiArgs...); err != nil {
		return err
	}
	admin, err := p.issue("readyz", "actgate-node-admin", []string{"system:masters"}, nil, nil)
	if err != nil {
		return err
	}
	if err := n.waitFor(b.ctx, "kube-apiserver /readyz", 2*time.Minute, func() error {
		return getOK(n.APIServer+"/readyz", p.caPEM, admin)
	}); err != nil {
		return err
	}
	b.logf("etcd and kube-apiserver up")

	kcm := b.path("controller-manager.kubeconfig")
	kcmPort, err := freePort("127.0.0.1")
	if err != nil {
		return err
	}
	if err := n.start(opts, "kube-controller-manager", filepath.Join(opts.NodeBinDir, "kube-controller-manager"),
		"--kubeconfig", kcm, "--authentication-kubeconfig", kcm, "--authorization-kubeconfig", kcm,
		"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(kcmPort), "--cert-dir", b.path("pki", "kcm-generated"),
		"--service-account-private-key-file", b.saKey, "--root-ca-file", ca,
		"--cluster-signing-cert-file", ca, "--cluster-signing-key-file", p.CAKeyFile(),
		"--use-service-account-credentials", "--leader-elect=false",
		"--service-cluster-ip-range", ServiceCIDR, "--cluster-name", n.Name); err != nil {
		return err
	}
	sched := b.path("scheduler.kubeconfig")
	schedPort, err := freePort("127.0.0.1")
	if err != nil {
		return err
	}
	return n.start(opts, "kube-scheduler", filepath.Join(opts.NodeBinDir, "kube-scheduler"),
		"--kubeconfig", sched, "--authentication-kubeconfig", sched, "--authorization-kubeconfig", sched,
		"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(schedPort), "--cert-dir", b.path("pki", "scheduler-generated"),
		"--leader-elect=false")
}

// kubeletAndProxy starts the kubelet and kube-proxy.
func (b *bringUp) kubeletAndProxy() error {
	n, opts := b.n, b.opts
	kubeletPort, err := freePort(NodeIP)
	if err != nil {
		return err
	}
	healthzPort, err := freePort("127.0.0.1")
	if err != nil {
		return err
	}
	if err := os.WriteFile(b.path("kubelet", "resolv.conf"), []byte("# no name servers: pods resolve Services through hostAliases\n"), 0o644); err != nil {
		return err
	}
	cfg := kubeletConfig(n.Dir, n.Name, n.ContainerdSocket, b.kubeletServing, b.pki.CAFile(), kubeletPort, healthzPort)
	if err := os.WriteFile(b.path("kubelet", "config.yaml"), []byte(cfg), 0o600); err != nil {
		return err
	}
	if err := n.start(opts, "kubelet", filepath.Join(opts.NodeBinDir, "kubelet"),
		"--config", b.path("kubelet", "config.yaml"), "--kubeconfig", b.path("kubelet.kubeconfig"),
		"--root-dir", b.path("kubelet", "root"), "--cert-dir", b.path("pki", "kubelet-generated"),
		"--node-ip", NodeIP, "--hostname-override", n.Name); err != nil {
		return err
	}
	proxyHealth, err := freePort("127.0.0.1")
	if err != nil {
		return err
	}
	proxyMetrics, err := freePort("127.0.0.1")
	if err != nil {
		return err
	}
	if err := os.WriteFile(b.path("kube-proxy.yaml"), []byte(kubeProxyConfig(b.path("kube-proxy.kubeconfig"), n.Name, proxyHealth, proxyMetrics)), 0o600); err != nil {
		return err
	}
	return n.start(opts, "kube-proxy", filepath.Join(opts.NodeBinDir, "kube-proxy"), "--config", b.path("kube-proxy.yaml"))
}

// ready waits for the node to be Ready and the default ServiceAccount to exist.
func (b *bringUp) ready() error {
	n := b.n
	if err := n.waitFor(b.ctx, "node "+n.Name+" Ready", 2*time.Minute, func() error {
		out, err := n.kubectlOut(b.ctx, "get", "node", n.Name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		if err != nil {
			return err
		}
		if strings.TrimSpace(out) != "True" {
			return fmt.Errorf("Ready=%q", out)
		}
		return nil
	}); err != nil {
		return err
	}
	return n.waitFor(b.ctx, "the default ServiceAccount", time.Minute, func() error {
		_, err := n.kubectlOut(b.ctx, "-n", "default", "get", "serviceaccount", "default")
		return err
	})
}

// start runs one of the node's processes and records it.
func (n *Node) start(opts Options, name, bin string, args ...string) error {
	p, err := startProc(name, bin, filepath.Join(n.Dir, "logs", name+".log"), opts.Detach,
		[]string{procMarker + n.Name, "HOME=" + filepath.Join(n.Dir, "home"), "XDG_CACHE_HOME=" + filepath.Join(n.Dir, "home", ".cache")}, args...)
	if err != nil {
		return err
	}
	n.st.Procs = append(n.st.Procs, p)
	return n.st.save()
}

// waitFor polls cond until it holds, a recorded process exits, or d passes.
func (n *Node) waitFor(ctx context.Context, what string, d time.Duration, cond func() error) error {
	deadline := time.Now().Add(d)
	var last error
	for {
		if last = cond(); last == nil {
			return nil
		}
		for _, p := range n.st.Procs {
			if !p.alive() {
				return fmt.Errorf("waiting for %s: %s exited:\n%s", what, p.Name, logTail(p.Log, 30))
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not there after %s: %v", what, d, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// ImportImage loads an image tarball (docker-archive or OCI) into containerd's k8s.io
// namespace, where the kubelet finds it; pods use it with imagePullPolicy Never. It returns
// what ctr printed.
func (n *Node) ImportImage(ctx context.Context, tarball string) (string, error) {
	return n.ctr(ctx, "images", "import", "--no-unpack=false", tarball)
}

func (n *Node) ctr(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"--address", n.ContainerdSocket, "--namespace", "k8s.io"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// UserKubeconfig writes a kubeconfig for user name in groups (a client certificate of the
// cluster CA: the API server takes the CN as the user and each O as a group) and returns its
// path.
func (n *Node) UserKubeconfig(name string, groups ...string) (string, error) {
	if n.pki == nil {
		return "", errors.New("node: no CA in this process (the node was brought up by another)")
	}
	file := strings.NewReplacer("@", "-at-", ":", "-", "/", "-").Replace(name)
	c, err := n.pki.issue("user-"+file, name, groups, nil, nil)
	if err != nil {
		return "", err
	}
	path := filepath.Join(n.Dir, "users", file+".kubeconfig")
	return path, n.pki.kubeconfig(path, n.APIServer, c)
}

// Env is the environment for kubectl, helm, crictl and ctr against the node: the caller's with
// KUBECONFIG, CONTAINER_RUNTIME_ENDPOINT, CONTAINERD_ADDRESS, the binaries first in PATH and HOME and the tools'
// caches in the run's folder. Never pass it to `go build`: it moves XDG_CACHE_HOME.
func (n *Node) Env() []string {
	home := filepath.Join(n.Dir, "home")
	vars := map[string]string{
		"KUBECONFIG":                 n.Kubeconfig,
		"CONTAINER_RUNTIME_ENDPOINT": "unix://" + n.ContainerdSocket,
		"CONTAINERD_ADDRESS":         n.ContainerdSocket,
		"PATH":                       n.ControlPlaneBinDir + ":" + n.NodeBinDir + ":" + os.Getenv("PATH"),
		"HOME":                       home,
		"XDG_CACHE_HOME":             filepath.Join(home, ".cache"),
		"XDG_CONFIG_HOME":            filepath.Join(home, ".config"),
		"XDG_DATA_HOME":              filepath.Join(home, ".local", "share"),
		"KUBECACHEDIR":               filepath.Join(home, ".kube", "cache"),
		"HELM_CACHE_HOME":            filepath.Join(home, ".cache", "helm"),
		"HELM_CONFIG_HOME":           filepath.Join(home, ".config", "helm"),
		"HELM_DATA_HOME":             filepath.Join(home, ".local", "share", "helm"),
	}
	var out []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); vars[k] == "" {
			out = append(out, kv)
		}
	}
	for k, v := range vars {
		out = append(out, k+"="+v)
	}
	return out
}

// Command prepares kubectl, helm or crictl (tool) from the node's binaries with Env, run from
// the repository root when it can be found.
func (n *Node) Command(ctx context.Context, tool string, args ...string) *exec.Cmd {
	bin := filepath.Join(n.ControlPlaneBinDir, tool)
	if tool == "crictl" {
		bin = filepath.Join(n.NodeBinDir, tool)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = n.Env()
	if root, err := envtest.RepoRoot(); err == nil {
		cmd.Dir = root
	}
	return cmd
}

func (n *Node) kubectlOut(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := n.Command(ctx, "kubectl", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// Memory is the resident memory of the node: its own processes (control plane, kubelet,
// kube-proxy, containerd), the containerd shims, and the pods (total_rss of the memory cgroup
// under the node's cgroup root), in bytes.
func (n *Node) Memory() (procs, shims, pods int64) {
	rss := func(pid int) int64 {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			return 0
		}
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				return kb * 1024
			}
		}
		return 0
	}
	for _, p := range n.st.Procs {
		if p.alive() {
			procs += rss(p.PID)
		}
	}
	for _, pid := range shimsOf(n.ContainerdSocket) {
		shims += rss(pid)
	}
	for _, m := range cgroupMounts() {
		b, err := os.ReadFile(filepath.Join(m, n.Name, "memory.stat"))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) == 2 && f[0] == "total_rss" {
				pods, _ = strconv.ParseInt(f[1], 10, 64)
			}
		}
	}
	return procs, shims, pods
}
