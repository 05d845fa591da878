package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/action"
	"github.com/actgate/actgate/internal/authority/boltstore"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/jcs"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/review/service"
	"github.com/actgate/actgate/internal/sidecar"
	"github.com/actgate/actgate/test/envtest"
)

// The sidecar rig's names.
const (
	authorityUser  = "actgate-authority-load"
	alicePrincipal = "alice@example.com"
	agentSA        = "agent"
	agentLabel     = "load-agent"
	sidecarSinkID  = "load-sink"
)

// sidecarTarget is a real kube-apiserver (test/envtest) with `actgate-controlplane authority` running as a
// user holding exactly service.PolicyRules; each run adds a namespace, its policy and agent
// pod, and an `actgate sidecar` process.
type sidecarTarget struct {
	bin, host, dir string
	env            *envtest.Env
	cs             kubernetes.Interface
	auth           *proc
	authURL        string
	caFile         string
	pubFile        string
	log            io.Writer
}

func (s *sidecarTarget) name() string { return targetSidecar }

func startSidecarTarget(ctx context.Context, bin, host, dir string, log io.Writer) (_ target, err error) {
	s := &sidecarTarget{bin: bin, host: host, dir: dir, log: log}
	// controller-runtime's envtest logs through its global logger, and prints a stack trace
	// when none was set.
	ctrllog.SetLogger(logr.Discard())
	start := time.Now()
	defer func() {
		if err != nil {
			_ = s.close()
		}
	}()
	if s.env, err = envtest.New(ctx, envtest.WithLog(log)); err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "  kube-apiserver and etcd up in %s\n", time.Since(start).Round(100*time.Millisecond))
	if s.cs, err = kubernetes.NewForConfig(s.env.Config); err != nil {
		return nil, err
	}
	// The cluster-wide and the per-namespace rules, bound cluster-wide: each run adds a
	// namespace, and nothing here runs the manager that would bind the namespaced ones there.
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: authorityUser}, Rules: append(service.PolicyRules(), service.NamespacePolicyRules()...)}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: authorityUser},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: authorityUser},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: authorityUser}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := s.env.Client.Create(ctx, o); err != nil {
			return nil, err
		}
	}
	user, err := s.env.AddUser(authorityUser)
	if err != nil {
		return nil, err
	}
	certFile, keyFile, caFile, err := writePKI(dir)
	if err != nil {
		return nil, err
	}
	signKey, pubFile, err := writeSigningKey(dir)
	if err != nil {
		return nil, err
	}
	s.caFile, s.pubFile = caFile, pubFile
	addr, err := freeAddr(host)
	if err != nil {
		return nil, err
	}
	if s.auth, err = startProc("actgate-authority", dir, controlPlaneBin(bin), os.Environ(), "authority", "--kubeconfig", user.Kubeconfig,
		"--bind-address", addr, "--metrics-bind-address", "0", "--tls-cert-file", certFile,
		"--tls-private-key-file", keyFile, "--signing-key-file", signKey); err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	roots.AppendCertsFromPEM(caPEM)
	if err := waitFor(s.auth, 60*time.Second, "serving TLS on "+addr, func() error { return dialTLS(addr, roots) }); err != nil {
		return nil, err
	}
	s.authURL = "https://" + addr
	fmt.Fprintf(log, "  actgate-controlplane authority serving in %s\n", time.Since(start).Round(100*time.Millisecond))
	return s, nil
}

func (s *sidecarTarget) close() error {
	var errs []error
	if s.auth != nil {
		errs = append(errs, s.auth.stop())
	}
	if s.env != nil {
		errs = append(errs, s.env.Stop())
	}
	return errors.Join(errs...)
}

// loadPolicy is the standalone gate's policy as a ToolPolicy of namespace ns.
func loadPolicy(ns, upstreamURL string) *v1alpha1.ToolPolicy {
	return &v1alpha1.ToolPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "load", Namespace: ns},
		Spec: v1alpha1.ToolPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": agentLabel}},
			Mode:        v1alpha1.PolicyModeEnforce,
			Sink:        &v1alpha1.SinkIdentity{ID: sidecarSinkID},
			Servers:     []v1alpha1.ToolServer{{Name: serverName, URL: upstreamURL, Protocol: v1alpha1.ServerProtocolMCP}},
			Rules: []v1alpha1.ToolRule{
				{Name: "balances", Tools: []string{toolBalance}, ConsequenceClass: v1alpha1.ConsequenceInformational,
					Evidence: &v1alpha1.EvidenceRequirement{Role: v1alpha1.EvidenceRoleNone}},
				{Name: "payments", Tools: []string{toolPayment}, ConsequenceClass: v1alpha1.ConsequenceFinancial,
					Evidence: &v1alpha1.EvidenceRequirement{Role: v1alpha1.EvidenceRoleHumanAuthorization, Principals: []string{alicePrincipal}},
					Alternatives: []v1alpha1.Alternative{{Label: "Pay at most 1 now", Reasoning: "Caps the amount while the rest is checked.",
						Args: runtime.RawExtension{Raw: []byte(`{"amount":1}`)}}}},
				{Name: "email", Tools: []string{toolEmail}, ConsequenceClass: v1alpha1.ConsequenceCommunication,
					Evidence: &v1alpha1.EvidenceRequirement{Role: v1alpha1.EvidenceRolePolicyPermit}},
			},
		},
	}
}

// sidecarRun is one namespace with its policy, agent pod and sidecar process.
type sidecarRun struct {
	t          *sidecarTarget
	ns         string
	p          *proc
	addr       string
	journalDir string
	alice      *k8sPrincipal
	// requests is the API server's count of requests served (apiRequests) once the sidecar
	// was up; nil when it could not be read.
	requests map[string]float64
}

func (s *sidecarTarget) startRun(ctx context.Context, runID, upstreamURL string) (sinkRun, error) {
	c := s.env.Client
	dir := filepath.Join(s.dir, runID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "load-"}}
	if err := c.Create(ctx, nsObj); err != nil {
		return nil, err
	}
	ns := nsObj.Name
	if err := c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: agentSA, Namespace: ns}}); err != nil {
		return nil, err
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "agent-0", Namespace: ns, Labels: map[string]string{"app.kubernetes.io/name": agentLabel}},
		Spec:       corev1.PodSpec{ServiceAccountName: agentSA, Containers: []corev1.Container{{Name: "agent", Image: "example.invalid/agent:1"}}},
	}
	if err := c.Create(ctx, pod); err != nil {
		return nil, err
	}
	policy := loadPolicy(ns, upstreamURL)
	if err := c.Create(ctx, policy); err != nil {
		return nil, err
	}
	// What the ToolPolicy controller writes once it compiled the policy (no manager runs here).
	policy.Status.PolicyEpoch = 1
	policy.Status.ObservedGeneration = policy.Generation
	meta.SetStatusCondition(&policy.Status.Conditions, metav1.Condition{Type: v1alpha1.ToolPolicyAcceptedCondition,
		Status: metav1.ConditionTrue, Reason: v1alpha1.ToolPolicyCompiledReason, ObservedGeneration: policy.Generation})
	if err := c.Status().Update(ctx, policy); err != nil {
		return nil, err
	}
	// The authority service lists policies from the watch cache.
	if err := waitCached(ctx, c, &v1alpha1.ToolPolicyList{}, ns, policy.Name, policy.ResourceVersion); err != nil {
		return nil, err
	}
	tr, err := s.cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, agentSA, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: []string{service.DefaultAudience}, ExpirationSeconds: ptr.To[int64](3600),
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	tokenFile := filepath.Join(dir, "token")
	credFile := filepath.Join(dir, "credential")
	for f, b := range map[string]string{tokenFile: tr.Status.Token, credFile: upstreamToken} {
		if err := os.WriteFile(f, []byte(b), 0o600); err != nil {
			return nil, err
		}
	}
	addr, err := freeAddr(s.host)
	if err != nil {
		return nil, err
	}
	r := &sidecarRun{t: s, ns: ns, addr: addr, journalDir: filepath.Join(dir, "journal"),
		alice: &k8sPrincipal{c: c, ns: ns}}
	if r.p, err = startProc("actgate-sidecar", dir, s.bin, os.Environ(), "sidecar", "--listen", addr,
		"--authority-url", s.authURL, "--authority-ca-file", s.caFile, "--authority-public-key-file", s.pubFile,
		"--token-file", tokenFile, "--namespace", ns, "--service-account", agentSA, "--sink-id", sidecarSinkID,
		"--server", serverName+"="+upstreamURL, "--credential-file", serverName+"="+credFile, "--journal-dir", r.journalDir); err != nil {
		return nil, err
	}
	if err := waitFor(r.p, 60*time.Second, "listening on "+addr, func() error { return dialTCP(addr) }); err != nil {
		_ = r.p.stop()
		return nil, err
	}
	r.requests, _ = apiRequests(ctx, s.cs)
	return r, nil
}

func (r *sidecarRun) endpoint() string     { return "http://" + r.addr + mcpproxy.Path(serverName) }
func (r *sidecarRun) pid() int             { return r.p.cmd.Process.Pid }
func (r *sidecarRun) principal() principal { return r.alice }

// floor runs the API floor of the run's mix against the same API server, with the objects of
// the sink's run as templates, drawing the operations the sink's run drew.
func (r *sidecarRun) floor(ctx context.Context, rc runConfig) (*FloorReport, error) {
	fmt.Fprintf(r.t.log, "  API floor, concurrency %d for %s …\n", rc.concurrency, rc.duration)
	return runFloor(ctx, r.t.env.Config, r.t.env.Scheme, r.ns, rc.concurrency, rc.duration, rc.mix, rc.seed+1)
}

// finish stops the sidecar and reads its journal, the namespace's authority Leases and the
// permit records of its Acts.
func (r *sidecarRun) finish(ctx context.Context) (World, error) {
	// The outbox reports outcomes off the call path: the run's API cost includes them once
	// every consumed Act shows its outcome (bounded; the wait's own lists of Acts show as
	// "list acts").
	start := time.Now()
	done, consumed, err := r.outcomesOnActs(ctx, 30*time.Second)
	if err != nil {
		return World{}, err
	}
	fmt.Fprintf(r.t.log, "  outcomes on the Acts: %d of %d consumed (%s after the mix)\n", done, consumed, time.Since(start).Round(10*time.Millisecond))
	if err := r.p.stop(); err != nil {
		return World{}, err
	}
	// What the run (calls, the scripted principal's writes and polls, outcome reports,
	// anchors) cost the API server, for the progress log.
	if after, err := apiRequests(ctx, r.t.cs); err == nil && r.requests != nil {
		lines, total := requestDelta(r.requests, after)
		fmt.Fprintf(r.t.log, "  kube-apiserver requests during the run: %.0f (%s)\n", total, strings.Join(lines, ", "))
	}
	snap, err := boltstore.ReadSnapshot(filepath.Join(r.journalDir, sidecar.JournalFile), 10*time.Second)
	if err != nil {
		return World{}, err
	}
	w := World{Dispatches: snap.Dispatches}
	// The sidecar journals nothing on the hot path; its receipt log (in the journal directory)
	// has an allow, with the operation id sent upstream, for every hot call it let through.
	logPath := filepath.Join(r.journalDir, sidecar.ReceiptsFile)
	w.HotSource = "the receipt log"
	if w.HotAllows, err = hotAllows(logPath); err != nil {
		return World{}, err
	}
	w.Receipts = verifyReceipts(logPath, filepath.Join(r.journalDir, sidecar.ReceiptPubFile))
	var leases coordinationv1.LeaseList
	if err := r.t.env.Client.List(ctx, &leases, client.InNamespace(r.ns)); err != nil {
		return World{}, err
	}
	for _, l := range leases.Items {
		if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
			w.Consumed = append(w.Consumed, Consumption{AuthorityID: l.Name, ConsumedBy: *l.Spec.HolderIdentity})
		}
	}
	// A machine Permit stores no Lease: the Act it creates records the authority and the
	// operation that consumed it.
	var acts v1alpha1.ActList
	if err := r.t.env.Client.List(ctx, &acts, client.InNamespace(r.ns)); err != nil {
		return World{}, err
	}
	for _, a := range acts.Items {
		if id, op := a.Annotations[v1alpha1.AnnotationActPermitAuthority], a.Annotations[v1alpha1.AnnotationActPermitOperation]; id != "" && op != "" {
			w.Consumed = append(w.Consumed, Consumption{AuthorityID: id, ConsumedBy: op})
		}
	}
	return w, nil
}

// outcomesOnActs waits up to d until every Act of the run's namespace that records a
// consumption (a permit record, or an operation in its status) records an outcome state, and
// returns how many do of how many.
func (r *sidecarRun) outcomesOnActs(ctx context.Context, d time.Duration) (done, consumed int, _ error) {
	deadline := time.Now().Add(d)
	for {
		var acts v1alpha1.ActList
		if err := r.t.env.Client.List(ctx, &acts, client.InNamespace(r.ns)); err != nil {
			return 0, 0, err
		}
		done, consumed = 0, 0
		for _, a := range acts.Items {
			if a.Annotations[v1alpha1.AnnotationActPermitOperation] == "" && a.Status.OperationID == "" {
				continue
			}
			consumed++
			switch a.Status.State {
			case v1alpha1.ActStateExecuted, v1alpha1.ActStateFailed, v1alpha1.ActStateIndeterminate:
				done++
			}
		}
		if done == consumed || !time.Now().Before(deadline) {
			return done, consumed, nil
		}
		select {
		case <-ctx.Done():
			return done, consumed, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// k8sPrincipal is alice resolving BindingMoments in one namespace. No admission webhook or
// BindingMoment controller runs in the rig (test/e2e covers them): it writes the resolution
// and the status the controller records after admission, then waits until the watch cache,
// from which the authority service reads moments, shows it.
type k8sPrincipal struct {
	c  client.Client
	ns string
}

func (k *k8sPrincipal) resolve(ctx context.Context, momentID, _, tool string, args json.RawMessage) error {
	m := &v1alpha1.BindingMoment{}
	// The authority service creates the BindingMoment before it answers the escalation, and
	// this read is a quorum read (the client has no cache), so it finds it.
	if err := k.c.Get(ctx, client.ObjectKey{Namespace: k.ns, Name: momentID}, m); err != nil {
		return fmt.Errorf("BindingMoment %s: %w", momentID, err)
	}
	idx, err := optionFor(m, tool, args)
	if err != nil {
		return err
	}
	m.Spec.Resolution = &v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionOption, OptionIdx: ptr.To(int32(idx)), EnvelopeDigest: m.Spec.EnvelopeDigest}
	if err := k.c.Update(ctx, m); err != nil {
		return fmt.Errorf("resolving %s: %w", momentID, err)
	}
	m.Status.State = v1alpha1.BindingMomentResolved
	m.Status.ResolvedBy = m.Spec.Principal
	m.Status.ResolvedAt = &metav1.Time{Time: time.Now()}
	if err := k.c.Status().Update(ctx, m); err != nil {
		return fmt.Errorf("recording %s resolved: %w", momentID, err)
	}
	return waitCachedObject(ctx, k.c, m)
}

// optionFor is the index of the moment's option whose action digest is exactly tool with args
// (envelope-04 §5.6, docs/architecture.md "The action an option authorises").
func optionFor(m *v1alpha1.BindingMoment, tool string, args json.RawMessage) (int, error) {
	env, err := envelope.Parse([]byte(m.Spec.Envelope))
	if err != nil {
		return 0, fmt.Errorf("BindingMoment %s envelope: %w", m.Name, err)
	}
	want, err := action.Digest(tool, args, jcs.Strict)
	if err != nil {
		return 0, err
	}
	for i := range env.NumOptions() {
		if o, _ := env.Option(i); o.ActionDigest == want {
			return i, nil
		}
	}
	return 0, fmt.Errorf("no option of %s authorises %s %s", m.Name, tool, args)
}

// waitCached waits until a list from the watch cache (resourceVersion "0") shows ns/name at rv.
func waitCached(ctx context.Context, c client.Client, list client.ObjectList, ns, name, rv string) error {
	for range 1000 {
		if err := c.List(ctx, list, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "0"}}); err != nil {
			return err
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return err
		}
		for _, o := range items {
			if m, ok := o.(client.Object); ok && m.GetName() == name && m.GetResourceVersion() == rv {
				return nil
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("the watch cache never showed %s/%s at resourceVersion %s", ns, name, rv)
}

// waitCachedObject waits until a GET from the watch cache (resourceVersion "0") shows obj at
// its current resourceVersion.
func waitCachedObject(ctx context.Context, c client.Client, obj *v1alpha1.BindingMoment) error {
	got := &v1alpha1.BindingMoment{}
	for range 2000 {
		// A read at resourceVersion "0" is served by the watch cache, which may not yet hold a
		// moment created a moment ago: NotFound there means "not yet", like an older version.
		err := c.Get(ctx, client.ObjectKeyFromObject(obj), got, &client.GetOptions{Raw: &metav1.GetOptions{ResourceVersion: "0"}})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return err
		case got.ResourceVersion == obj.ResourceVersion:
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return fmt.Errorf("the watch cache never showed BindingMoment %s/%s at resourceVersion %s", obj.Namespace, obj.Name, obj.ResourceVersion)
}

// writePKI writes a CA and a serving certificate for 127.0.0.1 and ::1 made with crypto/x509
// (in a cluster cert-controller or cert-manager makes them).
func writePKI(dir string) (certFile, keyFile, caFile string, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", "", err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "actgate-load-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return "", "", "", err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return "", "", "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", "", err
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "actgate-authority"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return "", "", "", err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", "", "", err
	}
	certFile, keyFile, caFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "ca.crt")
	for f, b := range map[string][]byte{
		certFile: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}),
		keyFile:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		caFile:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
	} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			return "", "", "", err
		}
	}
	return certFile, keyFile, caFile, nil
}

// writeSigningKey writes a fresh Ed25519 authority-signing key (PKCS#8, 0600) and its public key.
func writeSigningKey(dir string) (priv, pub string, err error) {
	pk, sk, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", "", err
	}
	skDER, err := x509.MarshalPKCS8PrivateKey(sk)
	if err != nil {
		return "", "", err
	}
	pkDER, err := x509.MarshalPKIXPublicKey(pk)
	if err != nil {
		return "", "", err
	}
	priv, pub = filepath.Join(dir, "signing.key"), filepath.Join(dir, "signing.pub")
	if err := os.WriteFile(priv, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: skDER}), 0o600); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(pub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pkDER}), 0o600); err != nil {
		return "", "", err
	}
	return priv, pub, nil
}
