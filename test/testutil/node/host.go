package node

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/actgate/actgate/test/envtest"
)

// The host side of a node: its binaries, the packages and pause image it needs, and the small
// process and network helpers the bring-up uses.

// NodeBinDir returns the folder of the node binaries: ACTGATE_NODE_BINS when set, otherwise
// the folder hack/node-bins.sh prints after building what is missing (cold: minutes).
func NodeBinDir(ctx context.Context, log io.Writer) (string, error) {
	if dir := os.Getenv("ACTGATE_NODE_BINS"); dir != "" {
		return dir, nil
	}
	root, err := envtest.RepoRoot()
	if err != nil {
		return "", err
	}
	var stdout bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "node-bins.sh"))
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = &stdout, log
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("node: hack/node-bins.sh: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	return strings.TrimSpace(lines[len(lines)-1]), nil
}

// ensurePackages installs the Debian packages the node runs on when one of their programs is
// missing: containerd, runc, the CNI plugins, iptables, conntrack (kube-proxy's cleanup) and
// nftables (the snapshot of the ruleset).
func ensurePackages(ctx context.Context, logf func(string, ...any)) error {
	need := map[string]string{
		"containerd": "containerd", "containerd-shim-runc-v2": "containerd", "ctr": "containerd",
		"runc": "runc", "/usr/lib/cni/bridge": "containernetworking-plugins",
		"/usr/lib/cni/host-local": "containernetworking-plugins", "/usr/lib/cni/loopback": "containernetworking-plugins",
		"iptables": "iptables", "conntrack": "conntrack", "nft": "nftables", "ip": "iproute2",
	}
	missing := map[string]bool{}
	for prog, pkg := range need {
		if strings.HasPrefix(prog, "/") {
			if err := executable(prog); err != nil {
				missing[pkg] = true
			}
		} else if _, err := exec.LookPath(prog); err != nil {
			missing[pkg] = true
		}
	}
	if len(missing) == 0 {
		return nil
	}
	var pkgs []string
	for p := range missing {
		pkgs = append(pkgs, p)
	}
	logf("installing Debian packages %v", pkgs)
	install := func() ([]byte, error) {
		cmd := exec.CommandContext(ctx, "apt-get", append([]string{"install", "-y", "-q", "--no-install-recommends"}, pkgs...)...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		return cmd.CombinedOutput()
	}
	if _, err := install(); err != nil {
		if out, err := exec.CommandContext(ctx, "apt-get", "update", "-q").CombinedOutput(); err != nil {
			return fmt.Errorf("node: apt-get update: %w\n%s", err, out)
		}
		if out, err := install(); err != nil {
			return fmt.Errorf("node: apt-get install %v: %w\n%s", pkgs, err, out)
		}
	}
	return nil
}

// buildPause builds the pause program statically and writes the sandbox image.
func buildPause(ctx context.Context, dir, out string) error {
	root, err := envtest.RepoRoot()
	if err != nil {
		return err
	}
	bin := filepath.Join(dir, "pause")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./test/testutil/node/pause")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build pause: %w\n%s", err, b)
	}
	return WriteImage(out, PauseImage, []ImageFile{{Path: "/pause", Source: bin, Mode: 0o755}},
		ImageConfig{Entrypoint: []string{"/pause"}, User: "65535:65535"})
}

func executable(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("node: %s is not an executable", p)
	}
	return nil
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func getOK(url string, caPEM []byte, c certPair) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cert, err := tls.X509KeyPair(c.CertPEM, c.KeyPEM)
	if err != nil {
		return err
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}}
	resp, err := hc.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, b)
	}
	return nil
}
