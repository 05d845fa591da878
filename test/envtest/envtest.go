package envtest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	actgatev1alpha1 "github.com/actgate/actgate/api/v1alpha1"
)

// ModulePath is the Go module whose root RepoRoot looks for.
const ModulePath = "github.com/actgate/actgate"

// CRDDir is the folder, relative to the repository root, of the CRDs `make manifests` generates.
const CRDDir = "config/crd/bases"

// Sentinel errors callers can branch on.
var (
	// ErrRepoRootNotFound: no go.mod of ModulePath in the working directory or above it.
	ErrRepoRootNotFound = errors.New("envtest: repository root (go.mod of " + ModulePath + ") not found")
	// ErrBinariesNotFound: the assets folder lacks a control-plane binary.
	ErrBinariesNotFound = errors.New("envtest: control-plane binary not found")
)

// Env is a running control plane with actgate's CRDs installed.
type Env struct {
	// Config is the admin (system:masters) rest.Config of the API server.
	Config *rest.Config
	// Client is a controller-runtime client for Config using Scheme.
	Client client.Client
	// Scheme holds client-go's types, apiextensions/v1 and actgate's v1alpha1.
	Scheme *runtime.Scheme
	// Kubeconfig is the path of an admin kubeconfig file for kubectl and helm.
	Kubeconfig string
	// BinDir is the folder holding etcd, kube-apiserver, kubectl and helm.
	BinDir string
	// Root is the repository root.
	Root string
	// Environment is the underlying controller-runtime environment (installed CRDs, webhook
	// options, AddUser).
	Environment *crenvtest.Environment

	dir     string // private folder: kubeconfigs, kubectl/helm state
	stopped bool
}

// Option adjusts how New starts the control plane.
type Option func(*options)

type options struct {
	noCRDs      bool
	crdDirs     []string
	addToScheme []func(*runtime.Scheme) error
	configure   []func(*crenvtest.Environment)
	log         io.Writer
}

// WithCRDDirs installs the CRDs in these folders (absolute, or relative to the repository root)
// in addition to config/crd/bases.
func WithCRDDirs(dirs ...string) Option {
	return func(o *options) { o.crdDirs = append(o.crdDirs, dirs...) }
}

// WithoutCRDs starts the control plane with no CRDs installed, for a test that installs them
// itself (helm installs the chart's crds/). Deleting an installed CRD instead waits on the API
// server's CRD cleanup finalizer, which has no bound on a busy machine.
func WithoutCRDs() Option {
	return func(o *options) { o.noCRDs = true }
}

// WithScheme registers more types with Env.Scheme (and so with Env.Client).
func WithScheme(addToScheme ...func(*runtime.Scheme) error) Option {
	return func(o *options) { o.addToScheme = append(o.addToScheme, addToScheme...) }
}

// WithEnvironment lets the caller adjust the controller-runtime environment before it starts,
// e.g. to set WebhookInstallOptions or extra kube-apiserver arguments.
func WithEnvironment(configure func(*crenvtest.Environment)) Option {
	return func(o *options) { o.configure = append(o.configure, configure) }
}

// WithAPIServerFlag sets a kube-apiserver flag (its name without the leading dashes, e.g.
// "authentication-config") to values before the control plane starts, replacing envtest's
// default for it; several values repeat the flag.
func WithAPIServerFlag(name string, values ...string) Option {
	return WithEnvironment(func(e *crenvtest.Environment) {
		e.ControlPlane.GetAPIServer().Configure().Set(name, values...)
	})
}

// WithLog sends the progress output of hack/envtest-bins.sh (a cold build takes minutes) to w
// instead of os.Stderr.
func WithLog(w io.Writer) Option {
	return func(o *options) { o.log = w }
}

// SkipIfShort skips t under `go test -short`: envtest tests start a real API server. The full
// suite (`make test`) never passes -short.
func SkipIfShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("envtest: -short skips integration tests against a real kube-apiserver; run `make test` (no -short) to include them")
	}
}

// Start starts a control plane for one test and stops it when the test ends. It skips the test
// under -short and fails it if the control plane cannot start.
func Start(t testing.TB, opts ...Option) *Env {
	t.Helper()
	SkipIfShort(t)
	env, err := New(context.Background(), opts...)
	if err != nil {
		t.Fatalf("envtest: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("envtest: stop: %v", err)
		}
	})
	return env
}

// New starts a control plane with the CRDs of config/crd/bases installed (a missing folder is
// an error). The caller must Stop it. Binaries come from BinDir.
func New(ctx context.Context, opts ...Option) (*Env, error) {
	o := options{log: os.Stderr}
	for _, opt := range opts {
		opt(&o)
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	bin, err := BinDir(ctx, o.log)
	if err != nil {
		return nil, err
	}

	scheme := runtime.NewScheme()
	adders := append([]func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, actgatev1alpha1.AddToScheme,
	}, o.addToScheme...)
	for _, add := range adders {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("envtest: build scheme: %w", err)
		}
	}

	var crdDirs []string
	if !o.noCRDs {
		crdDirs = append(crdDirs, filepath.Join(root, CRDDir))
	}
	for _, d := range o.crdDirs {
		if !filepath.IsAbs(d) {
			d = filepath.Join(root, d)
		}
		crdDirs = append(crdDirs, d)
	}
	te := &crenvtest.Environment{
		Scheme:                   scheme,
		CRDDirectoryPaths:        crdDirs,
		ErrorIfCRDPathMissing:    true,
		BinaryAssetsDirectory:    bin,
		ControlPlaneStartTimeout: 2 * time.Minute, // two shared cores; a cold start can be slow
		ControlPlaneStopTimeout:  time.Minute,
	}
	for _, configure := range o.configure {
		configure(te)
	}

	dir, err := os.MkdirTemp("", "actgate-envtest-")
	if err != nil {
		return nil, fmt.Errorf("envtest: %w", err)
	}
	env := &Env{Scheme: scheme, BinDir: bin, Root: root, Environment: te, dir: dir}

	cfg, err := te.Start()
	if err != nil {
		_ = te.Stop()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("envtest: start control plane from %s: %w", bin, err)
	}
	env.Config = cfg
	if env.Client, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("envtest: client: %w", err)
	}
	env.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(env.Kubeconfig, te.KubeConfig, 0o600); err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("envtest: write kubeconfig: %w", err)
	}
	return env, nil
}

// Stop stops the control plane and removes the Env's private folder. Cancel managers and
// informers first. Calling Stop again does nothing.
func (e *Env) Stop() error {
	if e.stopped {
		return nil
	}
	e.stopped = true
	err := e.Environment.Stop()
	if rmErr := os.RemoveAll(e.dir); rmErr != nil {
		err = errors.Join(err, rmErr)
	}
	if err != nil {
		return fmt.Errorf("envtest: stop: %w", err)
	}
	return nil
}

// Namespace creates a fresh namespace (test-xxxxx) and returns its name. It is not deleted:
// without a controller-manager a deleted namespace never finishes terminating, and the whole
// control plane goes away at Stop.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.Client.Create(ctx, ns); err != nil {
		t.Fatalf("envtest: create namespace: %v", err)
	}
	return ns.Name
}

// User is an identity provisioned on the control plane (client certificate authentication).
type User struct {
	// Name is the Kubernetes user name (what admission sees as userInfo.username).
	Name string
	// Config authenticates as the user.
	Config *rest.Config
	// Client is a controller-runtime client for Config.
	Client client.Client
	// Kubeconfig is the path of a kubeconfig file that authenticates as the user.
	Kubeconfig string
}

// AddUser provisions a user with the given name and groups, e.g. a principal
// ("alice@example.com") or a service account name ("system:serviceaccount:ns:agent"). The user
// has no permissions beyond what RBAC grants it (system:masters in groups grants everything).
func (e *Env) AddUser(name string, groups ...string) (*User, error) {
	au, err := e.Environment.AddUser(crenvtest.User{Name: name, Groups: groups}, &rest.Config{QPS: 1000, Burst: 2000})
	if err != nil {
		return nil, fmt.Errorf("envtest: add user %q: %w", name, err)
	}
	kc, err := au.KubeConfig()
	if err != nil {
		return nil, fmt.Errorf("envtest: kubeconfig of %q: %w", name, err)
	}
	f, err := os.CreateTemp(e.dir, "user-*.kubeconfig")
	if err != nil {
		return nil, fmt.Errorf("envtest: %w", err)
	}
	if _, err := f.Write(kc); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("envtest: write kubeconfig of %q: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("envtest: write kubeconfig of %q: %w", name, err)
	}
	c, err := client.New(au.Config(), client.Options{Scheme: e.Scheme})
	if err != nil {
		return nil, fmt.Errorf("envtest: client of %q: %w", name, err)
	}
	return &User{Name: name, Config: au.Config(), Client: c, Kubeconfig: f.Name()}, nil
}

// ToolEnv is the process environment for kubectl and helm: the test's own environment with
// KUBECONFIG set to the admin kubeconfig, BinDir first in PATH, and HOME, XDG_*_HOME,
// KUBECACHEDIR and HELM_*_HOME pointed into the Env's private folder so neither tool touches the
// real home. It is only for those tools' processes; never pass it to `go build` or `go test`,
// whose build cache lives under XDG_CACHE_HOME.
func (e *Env) ToolEnv() []string {
	home := filepath.Join(e.dir, "home")
	vars := map[string]string{
		"KUBECONFIG":       e.Kubeconfig,
		"PATH":             e.BinDir + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME":             home,
		"XDG_CACHE_HOME":   filepath.Join(home, ".cache"),
		"XDG_CONFIG_HOME":  filepath.Join(home, ".config"),
		"XDG_DATA_HOME":    filepath.Join(home, ".local", "share"),
		"KUBECACHEDIR":     filepath.Join(home, ".kube", "cache"),
		"HELM_CACHE_HOME":  filepath.Join(home, ".cache", "helm"),
		"HELM_CONFIG_HOME": filepath.Join(home, ".config", "helm"),
		"HELM_DATA_HOME":   filepath.Join(home, ".local", "share", "helm"),
	}
	out := make([]string, 0, len(os.Environ())+len(vars))
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !overridden(vars, k) {
			out = append(out, kv)
		}
	}
	for k, v := range vars {
		out = append(out, k+"="+v)
	}
	return out
}

func overridden(vars map[string]string, key string) bool {
	_, ok := vars[key]
	return ok
}

// Command prepares BinDir's kubectl or helm (tool) with args and ToolEnv, run from the
// repository root. Use it when a test expects the tool to fail; Kubectl and Helm fail the test.
func (e *Env) Command(ctx context.Context, tool string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(e.BinDir, tool), args...)
	cmd.Env = e.ToolEnv()
	cmd.Dir = e.Root
	return cmd
}

// Kubectl runs the real kubectl with args as admin and returns its stdout; it fails t, with
// stderr, when kubectl exits non-zero.
func (e *Env) Kubectl(t testing.TB, args ...string) string {
	t.Helper()
	return e.run(t, "kubectl", args...)
}

// Helm runs the real helm with args as admin and returns its stdout; it fails t, with stderr,
// when helm exits non-zero. Never pass --wait: nothing rolls out without a kubelet.
func (e *Env) Helm(t testing.TB, args ...string) string {
	t.Helper()
	return e.run(t, "helm", args...)
}

func (e *Env) run(t testing.TB, tool string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := e.Command(ctx, tool, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", tool, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// RepoRoot finds the repository root: the nearest folder at or above the working directory
// whose go.mod declares ModulePath (`go test` runs in the package's folder).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("envtest: %w", err)
	}
	for {
		if isModuleRoot(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", ErrRepoRootNotFound
		}
		dir = parent
	}
}

func isModuleRoot(goMod string) bool {
	f, err := os.Open(goMod)
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) == 2 && fields[0] == "module" {
			return strings.Trim(fields[1], `"`) == ModulePath
		}
	}
	return false
}

// BinDir returns the folder of the control-plane binaries: KUBEBUILDER_ASSETS when set,
// otherwise the folder hack/envtest-bins.sh prints after building any that are missing (cold:
// minutes; warm: instant). The script's progress goes to log. It checks that etcd and
// kube-apiserver are there.
func BinDir(ctx context.Context, log io.Writer) (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		root, err := RepoRoot()
		if err != nil {
			return "", err
		}
		if log == nil {
			log = io.Discard
		}
		var stdout bytes.Buffer
		cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "envtest-bins.sh"))
		cmd.Dir = root
		cmd.Stdout, cmd.Stderr = &stdout, log
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("envtest: hack/envtest-bins.sh: %w", err)
		}
		lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
		dir = strings.TrimSpace(lines[len(lines)-1])
	}
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if st, err := os.Stat(filepath.Join(dir, b)); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return "", fmt.Errorf("%w: %s in %q (set KUBEBUILDER_ASSETS or run hack/envtest-bins.sh)", ErrBinariesNotFound, b, dir)
		}
	}
	return dir, nil
}
