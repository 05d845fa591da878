package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/actgate/actgate/internal/review/service"
	"github.com/actgate/actgate/test/envtest"
	"github.com/actgate/actgate/test/testutil"
	"github.com/actgate/actgate/webhook"
)

// The binaries are built once per test process, into binDir (removed by TestMain), for every
// test that stands up the control plane.
var (
	binDir   string
	binOnce  sync.Once
	binBuilt bool
)

// builtBinaries builds actgate, actgate-controlplane and kubectl-actgate from root on the first
// call and returns their folder.
func builtBinaries(t *testing.T, root string) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "actgate-e2e-bin-")
		if err != nil {
			t.Fatal(err)
		}
		binDir = dir
		buildBinaries(t, root, dir)
		binBuilt = true
	})
	if !binBuilt {
		t.Fatal("building the binaries failed in an earlier test")
	}
	return binDir
}

// controlPlane is step 1 of the story (doc.go): the API server, the chart installed with helm,
// the manager and the authority service as local processes running as the chart's service
// accounts.
type controlPlane struct {
	env       *envtest.Env
	bin       string // the built binaries' folder: the kubectl plugin's PATH entry
	actgate   string // the actgate binary
	pki       *testutil.PKI
	work      string
	signPub   string // the authority's signing public key file
	authAddr  string // the authority service's address
	authority *proc
}

// startControlPlane builds the binaries, starts the API server, creates agentNS, installs the
// chart with each of principals entitled to resolve binding moments in agentNS, and runs the
// manager (admission webhooks pointed at it) and the authority service.
func startControlPlane(t *testing.T, agentNS string, principals ...string) *controlPlane {
	t.Helper()
	root, err := envtest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := builtBinaries(t, root)
	actgate := filepath.Join(bin, "actgate")
	controlPlaneBin := filepath.Join(bin, "actgate-controlplane")

	// The chart's crds/ are the only CRDs: helm installs them.
	env := envtest.Start(t, envtest.WithoutCRDs())
	ctx := t.Context()
	c := env.Client
	pki := testutil.NewPKI(t, t.TempDir(), "actgate-webhook-service.actgate-system.svc", "actgate-authority.actgate-system.svc")
	work := t.TempDir()

	// ---- 1. The chart, the manager and the authority service ----------------------------------
	t.Log("step 1: helm install, manager and authority service as local processes")
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentNS}}); err != nil {
		t.Fatal(err)
	}
	helmArgs := []string{"install", "actgate", "charts/actgate", "--namespace", releaseNS, "--create-namespace"}
	for i, p := range principals {
		helmArgs = append(helmArgs, "--set", fmt.Sprintf("rbac.principals[%d].user=%s", i, p), "--set", fmt.Sprintf("rbac.principals[%d].namespaces={%s}", i, agentNS))
	}
	env.Helm(t, helmArgs...)
	out := env.Kubectl(t, "get", "deploy,svc,sa,cm", "-n", releaseNS, "-o", "name")
	for _, want := range []string{"deployment.apps/actgate-manager", "deployment.apps/actgate-authority", "configmap/actgate-webhook-config",
		"serviceaccount/actgate-manager", "serviceaccount/actgate-authority"} {
		if !strings.Contains(out, want) {
			t.Fatalf("helm install did not create %s:\n%s", want, out)
		}
	}
	testutil.Eventually(t, 2*time.Minute, "the chart's CRDs to be established", func() error {
		for _, name := range []string{"toolpolicies.actgate.io", "acts.actgate.io", "bindingmoments.actgate.io"} {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
				return err
			}
			if !slices.ContainsFunc(crd.Status.Conditions, func(c apiextensionsv1.CustomResourceDefinitionCondition) bool {
				return c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
			}) {
				return errors.New(name + " not established")
			}
		}
		return nil
	})

	// The manager runs as the chart's manager service account, with the chart's webhook
	// configuration (certificates provided here instead of by the rotator), and the chart's
	// webhook configurations pointed at it.
	mgrName, mgrGroups := sa(releaseNS, "actgate-manager")
	mgrUser, err := env.AddUser(mgrName, mgrGroups...)
	if err != nil {
		t.Fatal(err)
	}
	whAddr := freeAddr(t)
	var cm corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: releaseNS, Name: "actgate-webhook-config"}, &cm); err != nil {
		t.Fatal(err)
	}
	// The chart's webhook.yaml, with what only exists in this test swapped in: the listener,
	// certificates provided here as files (mode external, source volume), and the files that
	// name the authority's CA and signing public key for the injector (in the chart: the
	// certificate Secret the manager copies, and a mounted Secret).
	var whCfg map[string]any
	if err := yaml.Unmarshal([]byte(cm.Data["webhook.yaml"]), &whCfg); err != nil {
		t.Fatalf("the chart's webhook.yaml: %v", err)
	}
	caFile := pki.CAFile
	signKey, signPub := testutil.SigningKey(t, work)
	whCfg["server"] = map[string]any{"host": "127.0.0.1", "port": portOf(t, whAddr), "certDir": pki.Dir}
	certs, _ := whCfg["certs"].(map[string]any)
	if certs == nil {
		certs = map[string]any{}
		whCfg["certs"] = certs
	}
	certs["mode"] = string(webhook.CertModeExternal)
	certs["source"] = string(webhook.CertSourceVolume)
	if trust, ok := whCfg["authority"].(map[string]any); ok {
		for k, local := range map[string]string{"caFile": caFile, "publicKeyFile": signPub} {
			if _, set := trust[k]; set {
				trust[k] = local
			}
		}
	}
	whYAML, err := yaml.Marshal(whCfg)
	if err != nil {
		t.Fatal(err)
	}
	whFile := testutil.WriteFile(t, work, "webhook.yaml", whYAML)
	if _, err := webhook.LoadConfig(whFile); err != nil {
		t.Fatalf("webhook config: %v", err)
	}
	pointWebhooksAt(t, c, "https://"+whAddr, pki.CAPEM)
	manager := start(t, "manager", controlPlaneBin, os.Environ(), "manager", "--kubeconfig", mgrUser.Kubeconfig,
		"--webhook-config", whFile, "--metrics-bind-address", "0", "--health-probe-bind-address", "0")
	waitTLS(t, manager, whAddr, pki.Pool)

	// The authority service runs as the chart's authority service account. What the service
	// documents it needs (service.PolicyRules) and the chart does not grant is a failure of the
	// chart; it is granted here so the rest of the story still runs.
	authName, authGroups := sa(releaseNS, "actgate-authority")
	if missing := missingRules(t, c, authName, authGroups, agentNS, service.PolicyRules()); len(missing) > 0 {
		t.Errorf("the chart's actgate-authority-role lacks what service.PolicyRules says the authority service needs: %s "+
			"(charts/actgate/templates/rbac-authority.yaml; granted by the test to continue)", strings.Join(describe(missing), "; "))
		grant(t, c, "e2e-authority-missing-rules", authName, missing)
	}
	authUser, err := env.AddUser(authName, authGroups...)
	if err != nil {
		t.Fatal(err)
	}
	authAddr := freeAddr(t)
	authorityProc := start(t, "authority", controlPlaneBin, os.Environ(), "authority", "--kubeconfig", authUser.Kubeconfig,
		"--bind-address", authAddr, "--metrics-bind-address", "0", "--tls-cert-file", pki.CertFile,
		"--tls-private-key-file", pki.KeyFile, "--signing-key-file", signKey)
	waitTLS(t, authorityProc, authAddr, pki.Pool)
	return &controlPlane{env: env, bin: bin, actgate: actgate, pki: pki, work: work, signPub: signPub, authAddr: authAddr, authority: authorityProc}
}
