package node_test

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/test/testutil"
	"github.com/actgate/actgate/webhook/inject"
)

const (
	// nextVersion is the release the suite upgrades to: the same tree, linked and tagged as a
	// later release (the chart's first release has no earlier one to start from).
	nextVersion = "0.1.1-next"
	nextRef     = "actgate.test/actgate:" + nextVersion
	// upgradedPod and lastPod are agent pods started before and after the upgrade.
	upgradedPod = "agent-1"
	lastPod     = "agent-2"
)

// upgrade follows docs/operations.md "Upgrading" with a live agent pod whose sidecar is of the
// installed release, a BindingMoment pending and the INDETERMINATE Acts of step 4: the CRDs,
// then `helm upgrade` to nextRef. The old sidecar keeps working against the new control plane,
// the pending moment is resolved after the upgrade and its call runs once (a replay does not),
// the INDETERMINATE Acts stay INDETERMINATE, the doctor names the old sidecar, and a new pod gets
// the new one.
func (s *suite) upgrade() {
	t := s.t
	t.Helper()
	began := time.Now()
	// The moment goes to alice, who resolves from her terminal.
	s.kubectl("-n", agentNS, "patch", "toolpolicy", "payments", "--type=json",
		"-p", `[{"op":"replace","path":"/spec/rules/1/evidence/principals","value":["`+alice+`"]}]`)
	s.startAgent(upgradedPod)
	oldImage := s.sidecarImage(upgradedPod)
	const args = `{"amount":77,"to":"ACME"}`
	bm := &v1alpha1.BindingMoment{}
	s.escalationAddressedTo("u", args, alice, bm)
	held := s.actsIn(v1alpha1.ActStateIndeterminate)
	if len(held) == 0 {
		fatal(t, "no INDETERMINATE Act before the upgrade: step 4 should have left two")
	}

	// The next release's image, built as `make image` builds one.
	dir := filepath.Join(s.work, "images")
	tarball := filepath.Join(dir, "next.tar")
	build := exec.CommandContext(t.Context(), "go", "run", "./hack/image", "-out", tarball, "-tag", nextRef, "-version", nextVersion)
	build.Dir = s.root
	if out, err := build.CombinedOutput(); err != nil {
		fatalf(t, "go run ./hack/image: %v\n%s", err, out)
	}
	if out, err := s.n.ImportImage(t.Context(), tarball); err != nil {
		fatalf(t, "import %s: %v\n%s", tarball, err, out)
	}

	u := readSection(t, s.root, "docs/operations.md", "## Upgrading")
	s.run(u.take("kubectl apply --server-side -f charts/actgate/crds/"))
	upgradeStart := time.Now()
	s.run(append(u.take("helm upgrade actgate charts/actgate -n "+releaseNS+" --reuse-values --wait"),
		"--set", "image.repository="+strings.Split(nextRef, ":")[0], "--set", "image.tag="+nextVersion, "--timeout", "3m"))
	t.Logf("helm upgrade --wait took %s", time.Since(upgradeStart).Round(time.Millisecond))
	for _, d := range []string{"actgate-manager", "actgate-authority", "actgate-approval"} {
		if img := s.kubectl("-n", releaseNS, "get", "deployment", d, "-o", "jsonpath={.spec.template.spec.containers[0].image}"); img != nextRef {
			errorf(t, "deployment %s runs %s after the upgrade, want %s", d, img, nextRef)
		}
	}

	// The old sidecar, against the new control plane: its read runs; the moment pending since
	// before the upgrade is still Pending and the INDETERMINATE Acts still INDETERMINATE.
	if img := s.sidecarImage(upgradedPod); img != oldImage {
		fatalf(t, "the running pod's sidecar changed from %s to %s", oldImage, img)
	}
	if res := s.call("u", "get_balance", `{"account":"ACME"}`); res.Err != "" || res.IsError {
		errorf(t, "a read through the old sidecar after the upgrade: %s code %q: %s", res.Err, res.code(), res.Text)
	}
	if err := s.c.Get(t.Context(), client.ObjectKeyFromObject(bm), bm); err != nil || bm.Status.State != v1alpha1.BindingMomentPending {
		fatalf(t, "the moment pending before the upgrade: %v %+v", err, bm.Status)
	}
	for _, name := range held {
		a := &v1alpha1.Act{}
		if err := s.c.Get(t.Context(), client.ObjectKey{Namespace: agentNS, Name: name}, a); err != nil || a.Status.State != v1alpha1.ActStateIndeterminate {
			errorf(t, "Act %s was INDETERMINATE before the upgrade: %v %s", name, err, a.Status.State)
		}
	}
	// alice resolves it with the new control plane; the old sidecar's retry runs exactly once.
	before := s.counts().Counts["send_payment"]
	s.resolveAsAlice(bm, "send_payment", args)
	if res := s.call("u", "send_payment", args); res.IsError || s.counts().Counts["send_payment"] != before+1 {
		fatalf(t, "the granted retry through the old sidecar: code %q upstream %v: %s", res.code(), s.counts().Counts, res.Text)
	}
	if res := s.call("u", "send_payment", args); s.counts().Counts["send_payment"] != before+1 {
		fatalf(t, "the granted call ran twice across the upgrade: code %q: %s", res.code(), res.Text)
	}
	if res := s.call("v", "send_payment", args); !res.IsError || s.counts().Counts["send_payment"] != before+1 {
		fatalf(t, "a replay from another session ran: code %q: %s", res.code(), res.Text)
	}

	// The doctor names the old sidecar and the fix; the restart it names is for a Deployment,
	// and the suite's agents are bare pods, so it starts a new one instead.
	doctor := u.take("kubectl actgate doctor -n " + agentNS)
	out, err := s.pluginCmd(s.plugin, s.n.Kubeconfig, append(doctor[1:], upgradedPod)...)
	if err != nil || !slices.ContainsFunc(strings.Split(out, "\n"), func(l string) bool { return containsAll(l, "WARN", "sidecar version", nextRef) }) {
		errorf(t, "kubectl actgate doctor on the pod started before the upgrade: %v\n%s", err, out)
	}
	u.skip("kubectl rollout restart deployment/billing-agent", "the suite's agents are bare pods; it starts a new one")
	u.done()
	s.startAgent(lastPod)
	if img := s.sidecarImage(lastPod); img != nextRef {
		errorf(t, "a pod created after the upgrade got sidecar %s, want %s", img, nextRef)
	}
	if res := s.call("w", "get_balance", `{"account":"ACME"}`); res.Err != "" || res.IsError {
		errorf(t, "a read through the new sidecar: %s code %q: %s", res.Err, res.code(), res.Text)
	}
	t.Logf("upgrade with live pods, a pending moment and %d INDETERMINATE Acts: %s", len(held), time.Since(began).Round(time.Millisecond))

	// The reverse skew, as in a rollback or a rollout that reaches sidecars first: the newer
	// sidecar against the installed release's control plane. An escalated call from it is
	// held, resolved, and runs once.
	s.helm("rollback", "actgate", "1", "-n", releaseNS, "--wait", "--timeout", "3m")
	if img := s.kubectl("-n", releaseNS, "get", "deployment", "actgate-authority", "-o", "jsonpath={.spec.template.spec.containers[0].image}"); img != s.installedRef {
		fatalf(t, "after helm rollback the authority service runs %s, want %s", img, s.installedRef)
	}
	s.waitRolledOut("actgate-authority", "actgate-manager")
	const rollbackArgs = `{"amount":66,"to":"ACME"}`
	s.escalationAddressedTo("w", rollbackArgs, alice, bm)
	before = s.counts().Counts["send_payment"]
	s.resolveAsAlice(bm, "send_payment", rollbackArgs)
	for range 2 {
		s.call("w", "send_payment", rollbackArgs)
	}
	if c := s.counts().Counts["send_payment"]; c != before+1 {
		fatalf(t, "the granted call through the newer sidecar against the older control plane ran %d times, want once", c-before)
	}
}

// resolveAsAlice has alice resolve bm with kubectl actgate resolve, choosing the option that
// authorises exactly tool with args, and waits until the manager records it Resolved by her.
func (s *suite) resolveAsAlice(bm *v1alpha1.BindingMoment, tool, args string) {
	t := s.t
	t.Helper()
	option := optionFor(t, bm, tool, args)
	s.resolveWith(bm, []string{"kubectl", "actgate", "resolve", bm.Name, "-n", agentNS, "--option", fmt.Sprint(option + 1)})
}

// resolveWith runs alice's resolve command (kubectl and its arguments) and waits until bm is
// recorded Resolved by her.
func (s *suite) resolveWith(bm *v1alpha1.BindingMoment, resolve []string) {
	t := s.t
	t.Helper()
	if out, err := s.pluginCmd(s.plugin, s.aliceConfig, resolve[1:]...); err != nil {
		fatalf(t, "alice's %s: %v\n%s", strings.Join(resolve, " "), err, out)
	}
	testutil.Eventually(t, 60*time.Second, "BindingMoment "+bm.Name+" to be recorded Resolved by alice", func() error {
		if err := s.c.Get(t.Context(), client.ObjectKeyFromObject(bm), bm); err != nil {
			return err
		}
		if bm.Status.State == v1alpha1.BindingMomentResolved && bm.Status.ResolvedBy == alice {
			return nil
		}
		return fmt.Errorf("%+v", bm.Status)
	})
}

// waitRolledOut waits until each Deployment of the release has rolled out.
func (s *suite) waitRolledOut(names ...string) {
	for _, d := range names {
		s.kubectl("-n", releaseNS, "rollout", "status", "deployment/"+d, "--timeout=180s")
	}
}

// uninstall follows docs/operations.md "Uninstalling": `helm uninstall` leaves the namespace
// closed to pods the injector did not admit, the running sidecar refusing protected calls, the
// manager's RoleBindings collected with their ClusterRoles, and what the table says stays; the
// namespace is then released and everything removed, as the section says.
func (s *suite) uninstall() {
	t := s.t
	t.Helper()
	ctx := t.Context()
	u := readSection(t, s.root, "docs/operations.md", "## Uninstalling")
	for _, look := range []string{"kubectl get toolpolicies -A", "kubectl get namespaces -l actgate.io/inject=true", "kubectl get bindingmoments -A", "kubectl get acts -A"} {
		t.Logf("%s:\n%s", look, s.run(u.take(look)))
	}
	var acts v1alpha1.ActList
	if err := s.c.List(ctx, &acts, client.InNamespace(agentNS)); err != nil {
		fatal(t, err)
	}
	s.run(u.take("helm uninstall actgate -n " + releaseNS + " --wait"))

	// What stays, as the table says.
	for _, obj := range []client.Object{
		&metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
			ObjectMeta: metav1.ObjectMeta{Name: "actgate-governed-pods"}},
		&metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: "actgate-governed-pods"}},
		&metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: "actgate-optin-pods"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: releaseNS, Name: "actgate-authority-signing-key"}},
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: releaseNS, Name: "actgate-manager.actgate.io"}},
	} {
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			errorf(t, "%T %s did not stay, as docs/operations.md says it does: %v", obj, obj.GetName(), err)
		}
	}
	// Each Act listed before the uninstall is still there (a sidecar may still report one it
	// recorded earlier, so the count alone says nothing).
	var after v1alpha1.ActList
	if err := s.c.List(ctx, &after, client.InNamespace(agentNS)); err != nil {
		fatal(t, err)
	}
	for _, a := range acts.Items {
		if !slices.ContainsFunc(after.Items, func(b v1alpha1.Act) bool { return b.UID == a.UID }) {
			errorf(t, "Act %s did not stay after the uninstall (Acts before %d, after %d)", a.Name, len(acts.Items), len(after.Items))
		}
	}
	// The manager's RoleBindings go with their ClusterRoles (the garbage collector).
	// The garbage collector's own pace decides when; a loaded CI machine has taken over a minute.
	gcStart := time.Now()
	testutil.Eventually(t, 3*time.Minute, "the manager's RoleBindings to be collected", func() error {
		for _, name := range []string{"actgate-authority", "actgate-manager"} {
			err := s.c.Get(ctx, client.ObjectKey{Namespace: agentNS, Name: name}, &rbacv1.RoleBinding{})
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("RoleBinding %s/%s: %v", agentNS, name, err)
			}
		}
		return nil
	})

	t.Logf("the manager's RoleBindings were collected %s after the uninstall", time.Since(gcStart).Round(time.Second))

	// A new agent pod is refused by the API server itself, with the fix; nothing starts
	// without the sidecar.
	out, err := s.kubectlErr("apply", "-f", testutil.WriteFile(t, s.work, "agent-3.yaml", []byte(s.agentManifest("agent-3"))))
	if err == nil || !containsAll(out, "actgate-governed-pods", "actgate injector did not admit", "kubectl label namespace "+agentNS+" actgate.io/inject-") {
		fatalf(t, "an agent pod in the governed namespace after the uninstall: %v\n%s", err, out)
	}
	t.Logf("a new pod after the uninstall: %s", strings.TrimSpace(out))
	// The running pod's sidecar refuses a protected call, and nothing reaches the upstream.
	before := s.counts().Counts["send_payment"]
	res := s.call("x", "send_payment", `{"amount":11,"to":"ACME"}`)
	if !res.IsError || s.counts().Counts["send_payment"] != before {
		errorf(t, "a protected call through a sidecar after the uninstall: isError=%v code %q upstream %v", res.IsError, res.code(), s.counts().Counts)
	}
	read := s.call("x", "get_balance", `{"account":"ACME"}`)
	t.Logf("after the uninstall: send_payment refused with %s; get_balance isError=%v code %q", res.code(), read.IsError, read.code())
	// Refused or timed out: which one depends on whether the gone Service's address still
	// swallows the connection (EF_060) or refuses it (EF_STORE_UNAVAILABLE); both fail closed.
	if c := res.code(); c != string(ef.EFStoreUnavailable) && c != string(ef.EF060) {
		errorf(t, "the protected call after the uninstall was refused with %q, want %s or %s (the authority service is gone): %s", c, ef.EFStoreUnavailable, ef.EF060, res.Text)
	}
	if read.Err != "" || read.IsError {
		errorf(t, "a hot-path read after the uninstall (decided in the pod, as the table says): %s code %q", read.Err, read.code())
	}

	// Releasing the namespace: a new pod then starts, without a sidecar.
	s.run(u.take("kubectl label namespace " + agentNS + " actgate.io/inject-"))
	s.run(u.take("kubectl delete toolpolicies --all -n " + agentNS))
	u.skip("kubectl rollout restart deployment/billing-agent", "the suite's agents are bare pods; it starts a new one")
	plain := strings.ReplaceAll(s.agentManifest("agent-4"), "name: "+agentSA, "name: default")
	s.apply("agent-4.yaml", plain)
	pod := &corev1.Pod{}
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: agentNS, Name: "agent-4"}, pod); err != nil {
		fatalf(t, "a pod in the released namespace: %v", err)
	}
	if slices.ContainsFunc(pod.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == inject.SidecarName }) {
		errorf(t, "a pod created after the uninstall has a sidecar")
	}

	// Removing everything.
	for _, rm := range []string{"kubectl delete validatingadmissionpolicybinding", "kubectl delete validatingadmissionpolicy ", "kubectl delete crd", "kubectl delete namespace " + releaseNS} {
		s.run(u.take(rm))
	}
	u.done()
	for _, obj := range []client.Object{
		&metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
			ObjectMeta: metav1.ObjectMeta{Name: "actgate-governed-pods"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: releaseNS}},
	} {
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
			errorf(t, "%T %s after removing everything: %v", obj, obj.GetName(), err)
		}
	}
	if out := s.kubectl("get", "crd", "-o", "name"); strings.Contains(out, "actgate.io") {
		errorf(t, "actgate CRDs after removing everything:\n%s", out)
	}
}

// startAgent creates the agent pod name, waits for it to be Ready and points the suite's
// calls at it.
func (s *suite) startAgent(name string) {
	s.t.Helper()
	s.apply(name+".yaml", s.agentManifest(name))
	s.kubectl("-n", agentNS, "wait", "--for=condition=Ready", "pod/"+name, "--timeout=180s")
	s.agent = "http://" + s.podIP(agentNS, name) + ":8081"
}

// sidecarImage is the image of the pod's injected sidecar.
func (s *suite) sidecarImage(pod string) string {
	s.t.Helper()
	return s.kubectl("-n", agentNS, "get", "pod", pod, "-o", `jsonpath={.spec.initContainers[?(@.name=="`+inject.SidecarName+`")].image}`)
}

// actsIn names the agent namespace's Acts in state.
func (s *suite) actsIn(state v1alpha1.ActState) []string {
	s.t.Helper()
	var list v1alpha1.ActList
	if err := s.c.List(s.t.Context(), &list, client.InNamespace(agentNS)); err != nil {
		fatal(s.t, err)
	}
	var names []string
	for _, a := range list.Items {
		if a.Status.State == state {
			names = append(names, a.Name)
		}
	}
	return names
}
