package envtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/test/envtest"
)

func TestRepoRootFindsTheModule(t *testing.T) {
	root, err := envtest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, envtest.CRDDir)); err != nil {
		t.Errorf("root %s has no %s: %v", root, envtest.CRDDir, err)
	}
	if _, err := os.Stat(filepath.Join(root, "hack", "envtest-bins.sh")); err != nil {
		t.Errorf("root %s has no hack/envtest-bins.sh: %v", root, err)
	}
}

func TestBinDirRejectsAnAssetsFolderWithoutBinaries(t *testing.T) {
	t.Setenv("KUBEBUILDER_ASSETS", t.TempDir())
	_, err := envtest.BinDir(context.Background(), nil)
	if !errors.Is(err, envtest.ErrBinariesNotFound) {
		t.Fatalf("BinDir with an empty KUBEBUILDER_ASSETS = %v, want ErrBinariesNotFound", err)
	}
}

// One control plane for the harness's own checks: the CRDs are installed, the client and the
// kubeconfig reach it, the real kubectl and helm work against it without touching $HOME, and
// AddUser yields a distinct identity that RBAC constrains.
func TestStart(t *testing.T) {
	xdgBefore, xdgSet := os.LookupEnv("XDG_CACHE_HOME")
	env := envtest.Start(t)
	ctx := t.Context()

	t.Run("CRDs installed and typed client works", func(t *testing.T) {
		ns := env.Namespace(t)
		list := &v1alpha1.ActList{}
		if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			t.Fatalf("list acts: %v", err)
		}
		// Every CRD of config/crd/bases, one file each.
		files, err := filepath.Glob(filepath.Join("..", "..", "config", "crd", "bases", "*.yaml"))
		if err != nil || len(files) == 0 {
			t.Fatalf("config/crd/bases: %d files, %v", len(files), err)
		}
		if len(env.Environment.CRDs) != len(files) {
			t.Errorf("installed %d CRDs, want %d (config/crd/bases)", len(env.Environment.CRDs), len(files))
		}
	})

	t.Run("kubectl uses the kubeconfig", func(t *testing.T) {
		out := env.Kubectl(t, "get", "crd", "acts.actgate.io", "-o", "jsonpath={.spec.names.shortNames}")
		if !strings.Contains(out, "act") {
			t.Errorf("short names %q", out)
		}
		var v struct {
			ServerVersion struct{ GitVersion string } `json:"serverVersion"`
		}
		if err := json.Unmarshal([]byte(env.Kubectl(t, "version", "-o", "json")), &v); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(v.ServerVersion.GitVersion, "v1.") {
			t.Errorf("server version %q", v.ServerVersion.GitVersion)
		}
	})

	t.Run("helm reaches the cluster", func(t *testing.T) {
		if _, err := os.Stat(filepath.Join(env.BinDir, "helm")); err != nil {
			t.Fatalf("no helm in %s: %v", env.BinDir, err)
		}
		if out := env.Helm(t, "list", "--all-namespaces", "-o", "json"); strings.TrimSpace(out) != "[]" {
			t.Errorf("helm list = %q, want []", out)
		}
	})

	t.Run("tool state stays out of the test process and HOME", func(t *testing.T) {
		if got, ok := os.LookupEnv("XDG_CACHE_HOME"); got != xdgBefore || ok != xdgSet {
			t.Errorf("XDG_CACHE_HOME changed in the test process: %q", got)
		}
		vars := map[string]string{}
		for _, kv := range env.ToolEnv() {
			k, v, _ := strings.Cut(kv, "=")
			if _, dup := vars[k]; dup {
				t.Errorf("%s set twice in ToolEnv", k)
			}
			vars[k] = v
		}
		home := vars["HOME"]
		for _, k := range []string{"XDG_CACHE_HOME", "XDG_CONFIG_HOME", "KUBECACHEDIR", "HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"} {
			if !strings.HasPrefix(vars[k], home+string(filepath.Separator)) {
				t.Errorf("%s=%q is not under the private HOME %q", k, vars[k], home)
			}
		}
		if vars["KUBECONFIG"] != env.Kubeconfig {
			t.Errorf("KUBECONFIG=%q, want %q", vars["KUBECONFIG"], env.Kubeconfig)
		}
		// kubectl get above filled its discovery cache in the private KUBECACHEDIR.
		if entries, err := os.ReadDir(vars["KUBECACHEDIR"]); err != nil || len(entries) == 0 {
			t.Errorf("kubectl cache not in %s: %v", vars["KUBECACHEDIR"], err)
		}
	})

	t.Run("AddUser is another identity", func(t *testing.T) {
		alice, err := env.AddUser("alice@example.com")
		if err != nil {
			t.Fatal(err)
		}
		out, err := env.Command(ctx, "kubectl", "--kubeconfig", alice.Kubeconfig, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}").Output()
		if err != nil {
			t.Fatalf("kubectl auth whoami: %v", err)
		}
		if string(out) != "alice@example.com" {
			t.Errorf("whoami = %q", out)
		}
		err = alice.Client.List(ctx, &v1alpha1.ActList{}, client.InNamespace("default"))
		if !apierrors.IsForbidden(err) {
			t.Errorf("alice without RBAC listed acts: err = %v, want Forbidden", err)
		}
	})

	t.Run("Stop stops the control plane and is idempotent", func(t *testing.T) {
		kubeconfigDir := filepath.Dir(env.Kubeconfig)
		if err := env.Stop(); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if err := env.Client.List(context.Background(), &v1alpha1.ActList{}); err == nil {
			t.Errorf("the API server still answers after Stop")
		}
		if _, err := os.Stat(kubeconfigDir); !os.IsNotExist(err) {
			t.Errorf("private folder %s survives Stop: %v", kubeconfigDir, err)
		}
		if err := env.Stop(); err != nil { // and once more from Start's cleanup
			t.Errorf("second Stop: %v", err)
		}
	})
}
