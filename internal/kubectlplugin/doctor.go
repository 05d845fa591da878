package kubectlplugin

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/diag"
	"github.com/actgate/actgate/webhook/inject"
)

// The chart's labels the doctor reads: the control plane's version on its Services, and the
// component of the authority service's pods.
const (
	labelVersion     = "app.kubernetes.io/version"
	labelServiceName = "kubernetes.io/service-name"
)

// maxDoctorPods bounds the pods one doctor run checks when no pod is named.
const maxDoctorPods = 20

// doctorClient reads what `kubectl actgate doctor` checks, as the kubeconfig user: nothing is
// written. A read the user's RBAC does not permit turns that check into a SKIP that says so.
type doctorClient struct {
	c client.Client
}

func newDoctorClient(cfg *rest.Config) (*doctorClient, error) {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := discoveryv1.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	core, disc, ag := corev1.SchemeGroupVersion, discoveryv1.SchemeGroupVersion, v1alpha1.GroupVersion
	m := meta.NewDefaultRESTMapper([]schema.GroupVersion{core, disc, ag})
	add := func(gv schema.GroupVersion, kind, plural string, scope meta.RESTScope) {
		m.AddSpecific(gv.WithKind(kind), gv.WithResource(plural), gv.WithResource(strings.ToLower(kind)), scope)
	}
	add(core, "Pod", "pods", meta.RESTScopeNamespace)
	add(core, "Service", "services", meta.RESTScopeNamespace)
	add(core, "ConfigMap", "configmaps", meta.RESTScopeNamespace)
	add(core, "ServiceAccount", "serviceaccounts", meta.RESTScopeNamespace)
	add(core, "Event", "events", meta.RESTScopeNamespace)
	add(core, "Namespace", "namespaces", meta.RESTScopeRoot)
	add(disc, "EndpointSlice", "endpointslices", meta.RESTScopeNamespace)
	add(ag, "ToolPolicy", "toolpolicies", meta.RESTScopeNamespace)
	c, err := client.New(cfg, client.Options{Scheme: s, Mapper: m, Log: logr.Discard()})
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return &doctorClient{c: c}, nil
}

// cannot is the SKIP of a read the API server refused, or the FAIL of another error.
func cannot(name, what string, err error) diag.Check {
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		return diag.Skip(name, "cannot check: your RBAC does not permit "+what+" ("+apiMessage(err)+")")
	}
	return diag.Fail(name, "", what+": "+apiMessage(err), "")
}

// Doctor checks what the pods of ns (or the one named pod) need to start and enforce, and
// returns the checks in order.
func (d *doctorClient) Doctor(ctx context.Context, ns, podName string) []diag.Check {
	var checks []diag.Check
	checks = append(checks, d.checkNamespace(ctx, ns))
	var policies []v1alpha1.ToolPolicy
	pl := &v1alpha1.ToolPolicyList{}
	if err := d.c.List(ctx, pl, client.InNamespace(ns)); err != nil {
		checks = append(checks, cannot("toolpolicies", "list toolpolicies in "+ns, err))
	} else {
		policies = pl.Items
		if len(policies) == 0 {
			checks = append(checks, diag.Fail("toolpolicies", "", "no ToolPolicy in namespace "+ns+": no pod here is governed",
				"kubectl apply -n "+ns+" -f config/samples/actgate_v1alpha1_toolpolicy.yaml (edited for your servers and agents)"))
		}
	}
	var pods []corev1.Pod
	if podName != "" {
		p := &corev1.Pod{}
		if err := d.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: podName}, p); err != nil {
			return append(checks, cannot("pod "+podName, "get pod "+podName+" in "+ns, err))
		}
		pods = []corev1.Pod{*p}
	} else {
		l := &corev1.PodList{}
		if err := d.c.List(ctx, l, client.InNamespace(ns)); err != nil {
			return append(checks, cannot("pods", "list pods in "+ns, err))
		}
		for _, p := range l.Items {
			if _, ok := inject.StatusOf(&p); ok || len(selecting(&p, policies)) > 0 {
				pods = append(pods, p)
			}
		}
		if len(pods) > maxDoctorPods {
			checks = append(checks, diag.Warn("pods", fmt.Sprintf("%d governed pods; checking the first %d", len(pods), maxDoctorPods),
				"name one: kubectl actgate doctor -n "+ns+" POD"))
			pods = pods[:maxDoctorPods]
		}
	}
	// The policies every checked pod needs, each once.
	needed := map[string]bool{}
	for i := range pods {
		for _, p := range selecting(&pods[i], policies) {
			needed[p.Name] = true
		}
		if st, ok := inject.StatusOf(&pods[i]); ok {
			for _, nn := range st.Policies {
				if pns, name, ok := strings.Cut(nn, "/"); ok && pns == ns {
					needed[name] = true
				}
			}
		}
	}
	for _, p := range policies {
		if podName == "" || needed[p.Name] {
			checks = append(checks, checkPolicy(&p))
		}
	}
	if podName != "" {
		for name := range needed {
			if !slices.ContainsFunc(policies, func(p v1alpha1.ToolPolicy) bool { return p.Name == name }) && policies != nil {
				checks = append(checks, diag.Fail("toolpolicy "+name, "", "the pod was injected for ToolPolicy "+name+", which no longer exists",
					"restart the pod (kubectl delete pod "+podName+" -n "+ns+") so it is injected for the policies that select it now"))
			}
		}
	}
	authority := map[string]bool{} // authority URLs checked already
	for i := range pods {
		checks = append(checks, d.checkPod(ctx, &pods[i], policies, authority)...)
	}
	if len(pods) == 0 && podName == "" {
		checks = append(checks, diag.Skip("pods", "no pod in "+ns+" is injected or selected by a ToolPolicy; "+
			"name one to check it: kubectl actgate doctor -n "+ns+" POD"))
	}
	return checks
}

// checkNamespace: the namespace is labelled for injection.
func (d *doctorClient) checkNamespace(ctx context.Context, ns string) diag.Check {
	n := &corev1.Namespace{}
	if err := d.c.Get(ctx, client.ObjectKey{Name: ns}, n); err != nil {
		return cannot("namespace "+ns, "get namespace "+ns, err)
	}
	if n.Labels[inject.LabelInject] != "true" {
		return diag.Fail("namespace "+ns, "", "not labelled "+inject.LabelInject+"=true: its pods get no sidecar",
			"kubectl label namespace "+ns+" "+inject.LabelInject+"=true, then restart the agent pods")
	}
	return diag.OK("namespace "+ns, "labelled "+inject.LabelInject+"=true")
}

// checkPolicy: Accepted and Ready, and the Ready reason.
func checkPolicy(p *v1alpha1.ToolPolicy) diag.Check {
	name := "toolpolicy " + p.Name
	acc := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ToolPolicyAcceptedCondition)
	ready := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ToolPolicyReadyCondition)
	describe := "kubectl describe toolpolicy " + p.Name + " -n " + p.Namespace
	switch {
	case acc == nil || ready == nil:
		return diag.Fail(name, "", "no Accepted or Ready condition yet: the manager has not reconciled it",
			"check the manager runs: kubectl -n actgate-system get pods; kubectl -n actgate-system logs deploy/actgate-manager")
	case acc.Status != "True":
		return diag.Fail(name, "", fmt.Sprintf("not accepted (%s): %s", acc.Reason, safe(acc.Message)),
			"correct the spec ("+describe+" shows where); calls to its servers are refused until it compiles")
	case ready.Status != "True" && ready.Reason == v1alpha1.ToolPolicySecretNotFoundReason:
		return diag.Fail(name, "", "not served (SecretNotFound): "+safe(ready.Message),
			"kubectl create secret generic NAME -n "+p.Namespace+" --from-literal=token=… (the credentialsSecretRef its servers name)")
	case ready.Status != "True":
		return diag.Fail(name, "", fmt.Sprintf("not served (%s): %s", ready.Reason, safe(ready.Message)), describe)
	case ready.Reason == v1alpha1.ToolPolicyAuditingReason:
		return diag.Warn(name, fmt.Sprintf("served in mode Audit (epoch %d): calls are observed, nothing is enforced", p.Status.PolicyEpoch),
			"set spec.mode: Enforce when the audit is done")
	case ready.ObservedGeneration != 0 && ready.ObservedGeneration < p.Generation:
		return diag.Warn(name, fmt.Sprintf("Ready is for generation %d, the spec is at %d: the manager has not caught up",
			ready.ObservedGeneration, p.Generation), "wait, or check the manager's logs")
	}
	return diag.OK(name, fmt.Sprintf("Accepted, Ready (%s), epoch %d", ready.Reason, p.Status.PolicyEpoch))
}

// selecting are the policies whose podSelector selects pod now.
func selecting(pod *corev1.Pod, policies []v1alpha1.ToolPolicy) []v1alpha1.ToolPolicy {
	sel, err := inject.Select(pod, policies)
	if err != nil {
		return nil
	}
	return sel
}

// checkPod: injected, its authority service, its service account, its sidecar's version and
// state, and what its probes said about the upstreams.
func (d *doctorClient) checkPod(ctx context.Context, pod *corev1.Pod, policies []v1alpha1.ToolPolicy, authorityDone map[string]bool) []diag.Check {
	name := "pod " + pod.Name
	restart := "kubectl delete pod " + pod.Name + " -n " + pod.Namespace + " (or kubectl rollout restart its Deployment)"
	st, injected := inject.StatusOf(pod)
	side := sidecarContainer(pod)
	if !injected || side == nil {
		if sel := selecting(pod, policies); len(sel) > 0 {
			return []diag.Check{diag.Fail(name, "", fmt.Sprintf("selected by ToolPolicy %s but has no actgate sidecar: it was created before "+
				"the policy or the namespace label, or while the webhook was away", sel[0].Name), restart)}
		}
		return []diag.Check{diag.Skip(name, "no actgate sidecar and no ToolPolicy selects it: not governed")}
	}
	checks := []diag.Check{diag.OK(name, "injected for "+strings.Join(st.Policies, ", ")+"; servers "+strings.Join(st.Servers, ", "))}
	env := map[string]string{}
	for _, e := range side.Env {
		env[e.Name] = e.Value
	}
	// The authority service the sidecar was given, and the control plane's version.
	cpVersion, cpNS := "", ""
	if u, err := url.Parse(env["ACTGATE_AUTHORITY_URL"]); err == nil {
		if _, after, ok := strings.Cut(u.Hostname(), "."); ok {
			cpNS, _, _ = strings.Cut(after, ".")
		}
	}
	if raw := env["ACTGATE_AUTHORITY_URL"]; raw != "" {
		svcCheck, version := d.checkAuthority(ctx, raw, authorityDone)
		checks = append(checks, svcCheck...)
		cpVersion = version
	}
	checks = append(checks, d.checkServiceAccount(ctx, pod))
	injectorImage := ""
	if cpNS != "" {
		injectorImage = d.injectorImage(ctx, cpNS)
	}
	checks = append(checks, checkVersion(side.Image, injectorImage, cpVersion, restart))
	state := d.checkSidecarState(ctx, pod, st.Servers)
	if cpNS != "" && cpNS != "actgate-system" {
		for i := range state { // the fixes name the chart's usual namespace; this pod's is cpNS
			state[i].Fix = strings.ReplaceAll(state[i].Fix, "-n actgate-system ", "-n "+cpNS+" ")
		}
	}
	return append(checks, state...)
}

func sidecarContainer(pod *corev1.Pod) *corev1.Container {
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == inject.SidecarName {
			return &pod.Spec.InitContainers[i]
		}
	}
	return nil
}

// checkAuthority: the Service the sidecar's authority URL names exists and has ready endpoints.
// It returns the control plane's version from the Service's labels ("" when not known).
func (d *doctorClient) checkAuthority(ctx context.Context, raw string, done map[string]bool) ([]diag.Check, string) {
	const name = "authority service"
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return []diag.Check{diag.Fail(name, "", "the sidecar's ACTGATE_AUTHORITY_URL does not parse", "restart the pod with the current injector")}, ""
	}
	labels := strings.Split(u.Hostname(), ".")
	if len(labels) < 2 {
		return []diag.Check{diag.Skip(name, "cannot check: "+u.Hostname()+" is not a Service name (SERVICE.NAMESPACE.svc)")}, ""
	}
	svcName, svcNS := labels[0], labels[1]
	svc := &corev1.Service{}
	if err := d.c.Get(ctx, client.ObjectKey{Namespace: svcNS, Name: svcName}, svc); err != nil {
		if apierrors.IsNotFound(err) {
			return []diag.Check{diag.Fail(name, diag.AuthorityUnreachable, fmt.Sprintf("Service %s/%s, which the sidecar calls, does not exist", svcNS, svcName),
				"install or repair the control plane: helm upgrade --install actgate charts/actgate -n "+svcNS+" (pods keep refusing protected calls until then)")}, ""
		}
		return []diag.Check{cannot(name, "get service "+svcName+" in "+svcNS, err)}, ""
	}
	version := svc.Labels[labelVersion]
	if done[raw] {
		return nil, version
	}
	done[raw] = true
	checks := []diag.Check{}
	sl := &discoveryv1.EndpointSliceList{}
	if err := d.c.List(ctx, sl, client.InNamespace(svcNS), client.MatchingLabels{labelServiceName: svcName}); err != nil {
		return append(checks, cannot(name, "list endpointslices in "+svcNS, err)), version
	}
	ready := 0
	for _, s := range sl.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				ready++
			}
		}
	}
	if ready == 0 {
		return append(checks, diag.Fail(name, diag.AuthorityUnreachable, fmt.Sprintf("Service %s/%s has no ready endpoint", svcNS, svcName),
			"kubectl -n "+svcNS+" get pods -l app.kubernetes.io/component=authority; kubectl -n "+svcNS+" logs deploy/"+svcName)), version
	}
	return append(checks, diag.OK(name, fmt.Sprintf("Service %s/%s has %d ready endpoint(s); the pod's token itself is checked there "+
		"(TokenReview) and only the sidecar can present it: see the sidecar line", svcNS, svcName, ready))), version
}

// checkServiceAccount: the pod's service account still exists (its projected token is
// refused by the authority service's TokenReview otherwise).
func (d *doctorClient) checkServiceAccount(ctx context.Context, pod *corev1.Pod) diag.Check {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	name := "service account " + sa
	if err := d.c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: sa}, &corev1.ServiceAccount{}); err != nil {
		if apierrors.IsNotFound(err) {
			return diag.Fail(name, diag.AuthorityRefused, "the pod's service account no longer exists: its token is refused",
				"recreate service account "+sa+" in "+pod.Namespace+" and restart the pod")
		}
		return cannot(name, "get serviceaccount "+sa+" in "+pod.Namespace, err)
	}
	return diag.OK(name, "exists: the pod's projected token can be verified")
}

// webhookConfigMap is the chart's injector configuration (charts/actgate configmap-webhook.yaml):
// its injection.image is the sidecar image the injector gives new pods.
const webhookConfigMap = "actgate-webhook-config"

// injectorImage is the sidecar image the injector in namespace ns gives new pods ("" when it
// cannot be read).
func (d *doctorClient) injectorImage(ctx context.Context, ns string) string {
	cm := &corev1.ConfigMap{}
	if err := d.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: webhookConfigMap}, cm); err != nil {
		return ""
	}
	var cfg struct {
		Injection struct {
			Image string `json:"image"`
		} `json:"injection"`
	}
	if err := yaml.Unmarshal([]byte(cm.Data["webhook.yaml"]), &cfg); err != nil {
		return ""
	}
	return cfg.Injection.Image
}

// checkVersion compares the pod's sidecar image with the one the injector gives new pods now
// (injectorImage), or, when that cannot be read, the image's tag with the control plane's
// version (the authority Service's app.kubernetes.io/version).
func checkVersion(image, injectorImage, cpVersion, restart string) diag.Check {
	const name = "sidecar version"
	tag := imageTag(image)
	switch {
	case injectorImage != "" && injectorImage == image:
		return diag.OK(name, "the sidecar runs the image the injector gives new pods ("+image+")")
	case injectorImage != "":
		return diag.Warn(name, fmt.Sprintf("the sidecar runs %s; the injector now gives new pods %s (an upgrade since the pod started)", image, injectorImage),
			"restart the pod so it gets the control plane's sidecar: "+restart)
	case cpVersion == "":
		return diag.Skip(name, "cannot check: neither the injector's configuration ("+webhookConfigMap+") nor the authority Service's "+
			labelVersion+" label could be read; sidecar image "+image)
	case tag == "":
		return diag.Skip(name, "cannot check: the sidecar image "+image+" is pinned by digest, not by a version tag; control plane "+cpVersion)
	case strings.TrimPrefix(tag, "v") != strings.TrimPrefix(cpVersion, "v"):
		return diag.Warn(name, fmt.Sprintf("the sidecar is %s, the control plane %s", tag, cpVersion),
			"restart the pod so the injector gives it the control plane's sidecar: "+restart)
	}
	return diag.OK(name, "the sidecar and the control plane are both "+cpVersion)
}

// imageTag is the tag of an image reference ("" when it has none or is pinned by digest).
func imageTag(image string) string {
	if strings.Contains(image, "@") {
		return ""
	}
	slash := strings.LastIndex(image, "/")
	if i := strings.LastIndex(image, ":"); i > slash {
		return image[i+1:]
	}
	return ""
}

// checkSidecarState reads the sidecar's container status and its probe Events, which carry
// its not-ready reasons (diag codes, one line each): the sidecar line, then one per upstream.
func (d *doctorClient) checkSidecarState(ctx context.Context, pod *corev1.Pod, servers []string) []diag.Check {
	const name = "sidecar"
	var cs *corev1.ContainerStatus
	for i := range pod.Status.InitContainerStatuses {
		if pod.Status.InitContainerStatuses[i].Name == inject.SidecarName {
			cs = &pod.Status.InitContainerStatuses[i]
		}
	}
	// A ready sidecar passes its readiness probe now: an older probe-failure Event is history.
	var problems []diag.Problem
	var evErr error
	if cs == nil || !cs.Ready {
		problems, evErr = d.probeProblems(ctx, pod)
	}
	var checks []diag.Check
	logs := "kubectl logs " + pod.Name + " -n " + pod.Namespace + " -c " + inject.SidecarName
	switch {
	case cs == nil:
		checks = append(checks, diag.Skip(name, "no container status yet (the pod is not scheduled or not started)"))
	case cs.Ready:
		checks = append(checks, diag.OK(name, fmt.Sprintf("ready (restarts %d): it holds its policy and reaches every upstream", cs.RestartCount)))
	default:
		detail := fmt.Sprintf("not ready (restarts %d)", cs.RestartCount)
		reason, fix := "", "read why: "+logs
		for _, p := range problems {
			if p.Subject == "policy" || p.Subject == "authority" {
				detail += "; " + p.Message
				if reason == "" || p.Subject == "authority" {
					reason, fix = p.Reason, p.Fix
				}
			}
		}
		checks = append(checks, diag.Fail(name, reason, detail, fix))
	}
	for _, s := range servers {
		n := "upstream " + s
		found := false
		for _, p := range problems {
			if p.Subject == s {
				checks = append(checks, diag.Fail(n, p.Reason, p.Message, p.Fix))
				found = true
				break
			}
		}
		switch {
		case found:
		case cs != nil && cs.Ready:
			checks = append(checks, diag.OK(n, "reachable from the pod (the sidecar's readiness checks it)"))
		case evErr != nil:
			checks = append(checks, diag.Skip(n, "cannot check from here: the plugin does not reach upstreams; the sidecar's probe Events say, "+
				"and reading them was refused ("+evErr.Error()+")"))
		default:
			checks = append(checks, diag.Skip(n, "no probe Event names it: the plugin does not reach upstreams itself; "+logs))
		}
	}
	return checks
}

// probeProblems parses the newest probe-failure Event of the pod's sidecar: `actgate sidecar
// probe` prints one line per problem, "REASON (subject): message. Fix: fix".
func (d *doctorClient) probeProblems(ctx context.Context, pod *corev1.Pod) ([]diag.Problem, error) {
	l := &corev1.EventList{}
	if err := d.c.List(ctx, l, client.InNamespace(pod.Namespace), client.MatchingFields{"involvedObject.name": pod.Name}); err != nil {
		if apierrors.IsForbidden(err) {
			return nil, errors.New("your RBAC does not permit list events in " + pod.Namespace)
		}
		return nil, err
	}
	evs := l.Items
	sort.SliceStable(evs, func(i, j int) bool { return eventTime(&evs[i]).After(eventTime(&evs[j])) })
	for _, ev := range evs {
		if ev.Reason != "Unhealthy" || ev.InvolvedObject.UID != pod.UID || !strings.Contains(ev.InvolvedObject.FieldPath, inject.SidecarName) {
			continue
		}
		return diag.ParseProbeOutput(ev.Message), nil
	}
	return nil, nil
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

func (p *plugin) doctorCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "doctor [POD]",
		Short: "Check what a governed pod needs, and say what to fix: policy, authority service, upstreams, versions",
		Long: `Check, as the current kubeconfig user, what the agent pods of a namespace (or the pod named) need
to start and enforce, and print per check OK or the problem with the command or value to fix it:

  namespace          labelled actgate.io/inject=true
  toolpolicy NAME    Accepted and Ready (reason Enforcing; Auditing is a warning)
  pod NAME           injected with the actgate sidecar (selected but not injected: restart it)
  authority service  the Service the sidecar calls exists and has ready endpoints
  service account    the pod's service account exists (its token is checked by TokenReview)
  sidecar version    the sidecar image's tag against the control plane's version
  sidecar            ready; if not, the reason its probe reported (the probe-failure Event)
  upstream NAME      what the sidecar's readiness said about it (the plugin does not reach
                     upstreams itself)

A read your RBAC does not permit is a SKIP line that says so. The reason codes are those of
docs/operations.md "Troubleshooting a pod that does not start". Exit status: 0 no check
failed (WARN and SKIP do not fail); 1 a check failed or the API server could not be asked;
2 usage.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := p.flags.ToRESTConfig()
			if err != nil {
				return exitWith(ExitError, fmt.Errorf("kubeconfig: %w", err))
			}
			d, err := newDoctorClient(cfg)
			if err != nil {
				return exitWith(ExitError, err)
			}
			ns, err := p.namespace()
			if err != nil {
				return err
			}
			pod := ""
			if len(args) == 1 {
				pod = args[0]
			}
			checks := d.Doctor(cmd.Context(), ns, pod)
			if failed := diag.Print(p.Streams.Out, checks); failed > 0 {
				return exitWith(ExitError, fmt.Errorf("%d of %d checks failed", failed, len(checks)))
			}
			return nil
		},
	}
}
