package envtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	actgatev1alpha1 "github.com/actgate/actgate/api/v1alpha1"
)

// Helpers the Kubernetes test rigs share: the ToolPolicy status the controller would write,
// the watch cache's view, the config/samples objects and the plugin's tool environment.

// AcceptPolicy writes the status the ToolPolicy controller would: Accepted at the current
// generation, with a policy epoch, and waits until the watch cache has it (WaitCached).
func AcceptPolicy(t testing.TB, c client.Client, p *actgatev1alpha1.ToolPolicy, epoch int64) {
	t.Helper()
	ctx := context.Background()
	if err := c.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
		t.Fatal(err)
	}
	p.Status.PolicyEpoch = epoch
	p.Status.ObservedGeneration = p.Generation
	meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{Type: actgatev1alpha1.ToolPolicyAcceptedCondition,
		Status: metav1.ConditionTrue, Reason: actgatev1alpha1.ToolPolicyCompiledReason, ObservedGeneration: p.Generation})
	if err := c.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	WaitCached(t, c, p.Namespace, p.Name, p.ResourceVersion)
}

// WaitCached waits until the API server's watch cache, from which the service lists policies
// and binding moments (resourceVersion "0"), shows the ToolPolicy ns/name at resourceVersion
// rv, or without it when rv is "". The cache lags etcd by milliseconds; tests that change an
// object and then expect the service to act on the change wait for it.
func WaitCached(t testing.TB, c client.Client, ns, name, rv string) {
	t.Helper()
	WaitListed(t, c, func() client.ObjectList { return &actgatev1alpha1.ToolPolicyList{} }, ns, name, rv)
}

// WaitListed is WaitCached for any kind: newList makes an empty list of it.
func WaitListed(t testing.TB, c client.Client, newList func() client.ObjectList, ns, name, rv string) {
	t.Helper()
	for range 300 {
		list := newList()
		if err := c.List(context.Background(), list, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "0"}}); err != nil {
			t.Fatal(err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		for _, o := range items {
			if m, ok := o.(client.Object); ok && m.GetName() == name {
				got = m.GetResourceVersion()
			}
		}
		if got == rv {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the watch cache never showed %s/%s at resourceVersion %q", ns, name, rv)
}

// LoadSample reads a config/samples object.
func LoadSample[T any](t testing.TB, root, name string) *T {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "config", "samples", name))
	if err != nil {
		t.Fatal(err)
	}
	obj := new(T)
	if err := yaml.UnmarshalStrict(b, obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// PluginEnv is the tools' environment (ToolEnv) with the plugin folder first on PATH and KUBECONFIG set
// to kubeconfig, the way a user with their own kubeconfig runs kubectl.
func (e *Env) PluginEnv(pluginDir, kubeconfig string) []string {
	env := e.ToolEnv()
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "PATH":
			kv = "PATH=" + pluginDir + string(os.PathListSeparator) + v
		case "KUBECONFIG":
			kv = "KUBECONFIG=" + kubeconfig
		}
		out = append(out, kv)
	}
	return out
}
