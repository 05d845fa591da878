package inject

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/actgate/actgate/api/v1alpha1"
)

// Sentinel errors. The pod handler denies the pod with the error's text for each of them.
var (
	// ErrNotInjectable: the pod's shape defeats the sidecar (host network, a shared process
	// namespace, the sidecar's port taken, a name the injector reserves).
	ErrNotInjectable = errors.New("inject: pod cannot be governed by the actgate sidecar")
	// ErrPolicy: the selecting policies cannot be wired into one sidecar (two list a server of
	// the same name, or a selector does not parse).
	ErrPolicy = errors.New("inject: the selecting ToolPolicies conflict")
)

// Inject returns a copy of pod with the actgate sidecar for policies (those that select it, see
// Select; at least one), and the Status recorded in its actgate.io/status annotation. pod is not
// modified. cfg must be defaulted and valid (Config.Default, Config.Validate).
//
// In order:
//
//  1. a pod that carries the status annotation or a container or volume named actgate-… is
//     stripped (Strip), and the parts it carried must turn out to be exactly those this
//     injection adds (up to the API server's defaults), else it is refused (ErrNotInjectable):
//     so Inject(Inject(p)) equals Inject(p) (the API server reinvokes the webhook), and a status
//     annotation or a reserved name written by the pod's author never decides what is dropped,
//     kept or trusted;
//  2. the pod as its author wrote it is refused (ErrNotInjectable, CheckAuthored) when it uses
//     a reserved name (a container, volume or volume mount named actgate-…) or projects a token
//     for the authority's audience; it is refused too if the sidecar could not govern it: hostNetwork
//     (127.0.0.1 would be the node's), shareProcessNamespace (the agent could read the
//     sidecar's process), a container already using Config.Port or Config.MetricsPort;
//  3. every reference an agent container makes to a credential Secret (the servers'
//     credentialsSecretRef) is removed from it: env valueFrom.secretKeyRef, envFrom secretRef,
//     mounts of volumes projecting such a Secret; the sidecar gets them (docs/architecture.md
//     "Anti-bypass");
//  4. agent containers get ACTGATE_MCP_URL_<SERVER> per server, and their MCP URL variables
//     (Config.URLEnv, and any variable whose value is a server's URL) are pointed at the
//     sidecar: http://127.0.0.1:<port>/mcp/<server>;
//  5. the sidecar template is rendered and merged as an overlay (a pod naming no service
//     account gets "default" named, which the projected token requires); with
//     Config.MetricsPort set the sidecar serves metrics on it (port actgate-metrics), and a pod
//     with no prometheus.io/ annotation of its own gets prometheus.io/scrape, port and path;
//     the overlay never overwrites an annotation the pod has;
//  6. the Status annotation is written.
//
// The result depends only on the pod and the policies, so the same input gives byte-identical
// output (golden files in testdata/inject).
func Inject(pod *corev1.Pod, policies []v1alpha1.ToolPolicy, cfg *Config) (*corev1.Pod, *Status, error) {
	if len(policies) == 0 {
		return nil, nil, fmt.Errorf("%w: no ToolPolicy selects the pod", ErrPolicy)
	}
	// The pod as its author wrote it. A pod that already carries injected parts (the
	// injector's own output, seen again when the API server reinvokes the webhook) is stripped
	// first; what it carried is accepted only when it is exactly what injecting the stripped pod
	// gives (sameInjection below), so a status annotation or actgate-… parts written by the pod's
	// author never decide what is dropped, kept or trusted.
	base, again := pod, carriesInjection(pod)
	if again {
		base = Strip(pod)
	}
	if err := CheckAuthored(base, cfg); err != nil {
		return nil, nil, err
	}
	out, st, err := inject(base, policies, cfg)
	if err != nil {
		return nil, nil, err
	}
	if again {
		if err := sameInjection(pod, out, st); err != nil {
			return nil, nil, err
		}
	}
	return out, st, nil
}

// inject injects the sidecar into base, a pod that carries no injection and passed
// CheckAuthored.
func inject(base *corev1.Pod, policies []v1alpha1.ToolPolicy, cfg *Config) (*corev1.Pod, *Status, error) {
	out := base.DeepCopy()
	if err := injectable(out, cfg); err != nil {
		return nil, nil, err
	}
	if out.Spec.ServiceAccountName == "" && out.Spec.DeprecatedServiceAccount == "" {
		// The token projection needs a named service account. A pod without one runs as
		// "default"; the ServiceAccount admission plugin sets the same name, and an API
		// server without that plugin would otherwise reject the injected pod.
		out.Spec.ServiceAccountName = "default"
	}
	// The reserved trust-anchor annotation names, whoever wrote them: nothing reads them, and a
	// pod must not look as if it carried its own anchors.
	delete(out.Annotations, AnnotationAuthorityCA)
	delete(out.Annotations, AnnotationAuthorityPublicKey)
	if len(out.Annotations) == 0 {
		out.Annotations = nil
	}
	servers, policyNames, err := serversOf(policies)
	if err != nil {
		return nil, nil, err
	}
	sinkID, err := sinkIDOf(policies)
	if err != nil {
		return nil, nil, err
	}

	st := &Status{Version: StatusVersion, Policies: policyNames}
	var serverURLs []string
	for _, s := range servers {
		st.Servers = append(st.Servers, s.Name)
		serverURLs = append(serverURLs, s.Name+"="+s.URL)
	}
	changes := map[string]*ContainerChange{}
	var order []string
	changeOf := func(name string) *ContainerChange {
		if c, ok := changes[name]; ok {
			return c
		}
		changes[name] = &ContainerChange{Container: name}
		order = append(order, name)
		return changes[name]
	}

	data := &TemplateData{
		Config: *cfg, Listen: fmt.Sprintf("127.0.0.1:%d", cfg.Port), Policies: policyNames,
		ServerNames: st.Servers, ServerURLs: serverURLs, SinkID: sinkID, Credentials: credentialProjection(servers),
		SidecarName: SidecarName, SidecarBinary: SidecarBinary, VolumeToken: VolumeToken, VolumeCredentials: VolumeCredentials,
		VolumeJournal: VolumeJournal, VolumeUpstreamCA: VolumeUpstreamCA, UpstreamCADir: UpstreamCADir, UpstreamCAFile: UpstreamCAFile,
		TokenDir: TokenDir, TokenFile: TokenDir + "/token", CredentialsDir: CredentialsDir, MovedDir: MovedDir,
		JournalDir:      JournalDir,
		MetricsPortName: MetricsPortName, MetricsPath: MetricsPath,
		AnnotationPrometheusScrape: AnnotationPrometheusScrape, AnnotationPrometheusPort: AnnotationPrometheusPort,
		AnnotationPrometheusPath: AnnotationPrometheusPath,
	}
	if data.ServiceAccountTokens, data.UpstreamOAuth, err = upstreamAuth(servers); err != nil {
		return nil, nil, err
	}
	if data.AgentOAuth, err = agentAuthOf(policies); err != nil {
		return nil, nil, err
	}
	data.TracingEndpoint, data.TracingSampleRatio = cfg.tracingEnv()
	if m := cfg.metricsPort(); m != 0 {
		data.MetricsListen, data.MetricsPort = fmt.Sprintf(":%d", m), m
		data.PrometheusAnnotations = !hasPrometheusAnnotations(out)
	}
	moveCredentials(out, CredentialSecrets(policies), data, changeOf)
	rewriteURLs(out, servers, cfg, changeOf)

	overlay, err := render(cfg.Template, data)
	if err != nil {
		return nil, nil, err
	}
	if err := merge(out, overlay, st); err != nil {
		return nil, nil, err
	}
	for _, name := range order {
		st.Changes = append(st.Changes, *changes[name])
	}
	raw, err := json.Marshal(st)
	if err != nil {
		return nil, nil, fmt.Errorf("inject: encode status: %w", err)
	}
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[AnnotationStatus] = string(raw)
	return out, st, nil
}

// Strip returns a copy of pod without a previous injection: the containers and volumes the
// Status names (only those named actgate-…), the sidecar and the injector's volumes in any case,
// the agent containers' edits undone (moved credential
// references put back at the end of their lists, rewritten variables restored in place, added
// ones removed), and the status and authority-trust annotations removed (also when the pod
// brought them itself). A missing or unreadable annotation undoes only
// what is recognisable by name. Strip trusts the annotation; Inject accepts what it stripped
// only when the injection gives those very parts back (so a forged annotation drops or keeps
// nothing), and refuses the pod otherwise.
func Strip(pod *corev1.Pod) *corev1.Pod {
	out := pod.DeepCopy()
	st, _ := StatusOf(out)
	if st == nil {
		st = &Status{}
	}
	drop := func(names []string, fixed ...string) map[string]bool {
		m := map[string]bool{}
		for _, n := range fixed {
			m[n] = true
		}
		for _, n := range names {
			if strings.HasPrefix(n, "actgate-") {
				m[n] = true
			}
		}
		return m
	}
	dropInit := drop(st.InitContainers, SidecarName)
	dropCont := drop(st.Containers, SidecarName)
	dropVol := drop(st.Volumes, VolumeToken, VolumeCredentials, VolumeJournal, VolumeUpstreamCA)
	out.Spec.InitContainers = slices.DeleteFunc(out.Spec.InitContainers, func(c corev1.Container) bool { return dropInit[c.Name] })
	out.Spec.Containers = slices.DeleteFunc(out.Spec.Containers, func(c corev1.Container) bool { return dropCont[c.Name] })
	out.Spec.Volumes = slices.DeleteFunc(out.Spec.Volumes, func(v corev1.Volume) bool { return dropVol[v.Name] })
	if len(out.Spec.InitContainers) == 0 {
		out.Spec.InitContainers = nil
	}
	if len(out.Spec.Volumes) == 0 {
		out.Spec.Volumes = nil
	}

	for _, ch := range st.Changes {
		c := findContainer(out, ch.Container)
		if c == nil {
			continue
		}
		for i := len(ch.Env) - 1; i >= 0; i-- {
			e := ch.Env[i]
			idx := slices.IndexFunc(c.Env, func(v corev1.EnvVar) bool { return v.Name == e.Name })
			switch {
			case e.Original == nil && idx >= 0:
				c.Env = slices.Delete(c.Env, idx, idx+1)
			case e.Original != nil && idx >= 0:
				c.Env[idx] = *e.Original
			case e.Original != nil:
				c.Env = append(c.Env, *e.Original)
			}
		}
		c.Env = append(c.Env, ch.MovedEnv...)
		c.EnvFrom = append(c.EnvFrom, ch.MovedEnvFrom...)
		c.VolumeMounts = append(c.VolumeMounts, ch.MovedVolumeMounts...)
		if len(c.Env) == 0 {
			c.Env = nil
		}
	}
	delete(out.Annotations, AnnotationStatus)
	// The reserved trust-anchor annotation names, whoever wrote them: nothing reads them, and a
	// pod must not look as if it carried its own anchors.
	delete(out.Annotations, AnnotationAuthorityCA)
	delete(out.Annotations, AnnotationAuthorityPublicKey)
	for _, a := range st.Annotations {
		// The scrape annotations the injector added (it adds them only to a pod that had
		// none), so that a new injection decides afresh with the current MetricsPort. Others
		// outside actgate.io/ are never removed, whatever a status names.
		if strings.HasPrefix(a, "actgate.io/") || a == AnnotationPrometheusScrape || a == AnnotationPrometheusPort || a == AnnotationPrometheusPath {
			delete(out.Annotations, a)
		}
	}
	if len(out.Annotations) == 0 {
		out.Annotations = nil
	}
	return out
}

func findContainer(pod *corev1.Pod, name string) *corev1.Container {
	if c := FindContainer(pod.Spec.InitContainers, name); c != nil {
		return c
	}
	return FindContainer(pod.Spec.Containers, name)
}

// agentContainers are the pod's init containers and containers (not ephemeral ones, which do
// not exist at creation), in that order.
func agentContainers(pod *corev1.Pod) []*corev1.Container {
	out := make([]*corev1.Container, 0, len(pod.Spec.InitContainers)+len(pod.Spec.Containers))
	for i := range pod.Spec.InitContainers {
		out = append(out, &pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	return out
}

func injectable(pod *corev1.Pod, cfg *Config) error {
	if pod.Spec.HostNetwork {
		return fmt.Errorf("%w: hostNetwork is true, so the sidecar's loopback listener would be the node's", ErrNotInjectable)
	}
	if pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace {
		return fmt.Errorf("%w: shareProcessNamespace is true, so agent containers could reach the sidecar's process and its credentials", ErrNotInjectable)
	}
	metrics := cfg.metricsPort()
	for _, c := range agentContainers(pod) {
		for _, p := range c.Ports {
			if p.ContainerPort == cfg.Port {
				return fmt.Errorf("%w: container %s uses port %d, the sidecar's", ErrNotInjectable, c.Name, cfg.Port)
			}
			if metrics != 0 && p.ContainerPort == metrics {
				// The sidecar could not bind its metrics listener and would not start, so
				// neither would the pod: refuse it now, saying why.
				return fmt.Errorf("%w: container %s uses port %d, the sidecar's metrics port (the injection configuration's metricsPort)", ErrNotInjectable, c.Name, metrics)
			}
		}
	}
	return nil
}

// hasPrometheusAnnotations: the pod carries its own scrape configuration (any prometheus.io/
// annotation), which the injector leaves whole rather than pointing it at the sidecar.
func hasPrometheusAnnotations(pod *corev1.Pod) bool {
	for k := range pod.Annotations {
		if strings.HasPrefix(k, PrometheusAnnotationPrefix) {
			return true
		}
	}
	return false
}

// serversOf lists the policies' servers in policy order, each server name once.
func serversOf(policies []v1alpha1.ToolPolicy) ([]v1alpha1.ToolServer, []string, error) {
	var servers []v1alpha1.ToolServer
	var names []string
	owner := map[string]string{}
	for _, p := range policies {
		name := p.Namespace + "/" + p.Name
		names = append(names, name)
		for _, s := range p.Spec.Servers {
			if o, dup := owner[s.Name]; dup {
				// internal/policy.Set fails the same ambiguity closed at evaluation.
				return nil, nil, fmt.Errorf("%w: server %q is listed by both %s and %s, which both select the pod", ErrPolicy, s.Name, o, name)
			}
			if strings.Contains(s.URL, ",") {
				// ACTGATE_SERVER_URLS is comma-separated.
				return nil, nil, fmt.Errorf("%w: server %q of %s has a comma in its URL, which the sidecar's server list cannot carry", ErrPolicy, s.Name, name)
			}
			owner[s.Name] = name
			servers = append(servers, s)
		}
	}
	slices.Sort(names)
	return servers, names, nil
}

// DefaultSinkID is the sink id of a sidecar whose policies name none (ToolPolicySpec.Sink:
// "each enforcing sink binds authority to its own identity"): the pod's namespace and name,
// expanded by the kubelet from the sidecar's own downward-API variables, so an authority
// issued to one pod's sink is refused by every other.
const DefaultSinkID = "$(ACTGATE_POD_NAMESPACE)/$(ACTGATE_POD_NAME)"

// sinkIDOf returns the one spec.sink.id the policies name, DefaultSinkID when none does, and
// ErrPolicy when they name different ones (the sidecar has one identity).
func sinkIDOf(policies []v1alpha1.ToolPolicy) (string, error) {
	id, from := "", ""
	for _, p := range policies {
		if p.Spec.Sink == nil || p.Spec.Sink.ID == "" {
			continue
		}
		switch {
		case id == "":
			id, from = p.Spec.Sink.ID, p.Namespace+"/"+p.Name
		case id != p.Spec.Sink.ID:
			return "", fmt.Errorf("%w: %s names sink %q and %s/%s names %q; one sidecar has one sink id", ErrPolicy, from, id, p.Namespace, p.Name, p.Spec.Sink.ID)
		}
	}
	if id == "" {
		return DefaultSinkID, nil
	}
	return id, nil
}

// credentialProjection groups the servers' credential references by Secret, in order of first
// use, each key projected to <server>/credential (or, for auth, <server>/client-secret and
// <server>/private-key).
func credentialProjection(servers []v1alpha1.ToolServer) []CredentialSecret {
	var out []CredentialSecret
	idx := map[string]int{}
	for _, s := range servers {
		for _, c := range credentialRefs(s) {
			i, ok := idx[c.ref.Name]
			if !ok {
				i = len(out)
				idx[c.ref.Name] = i
				out = append(out, CredentialSecret{Secret: c.ref.Name})
			}
			out[i].Items = append(out[i].Items, CredentialItem{Key: c.ref.Key, Path: c.path})
		}
	}
	return out
}

// moveCredentials removes credential references from agent containers and hands them to the
// sidecar (data.Moved*), recording each removal.
func moveCredentials(pod *corev1.Pod, secrets map[string]bool, data *TemplateData, changeOf func(string) *ContainerChange) {
	if len(secrets) == 0 {
		return
	}
	vols := credentialVolumes(pod, secrets)
	envSeen := map[string]bool{}
	fromSeen := map[string]bool{}
	volSeen := map[string]bool{}
	for _, c := range agentContainers(pod) {
		var keepEnv []corev1.EnvVar
		for _, e := range c.Env {
			if !secrets[envSecret(e)] {
				keepEnv = append(keepEnv, e)
				continue
			}
			ch := changeOf(c.Name)
			ch.MovedEnv = append(ch.MovedEnv, e)
			// The sidecar's own ACTGATE_* variables are not overridable from an agent.
			if !envSeen[e.Name] && !strings.HasPrefix(e.Name, "ACTGATE_") {
				envSeen[e.Name] = true
				data.MovedEnv = append(data.MovedEnv, e)
			}
		}
		c.Env = keepEnv
		var keepFrom []corev1.EnvFromSource
		for _, ef := range c.EnvFrom {
			if ef.SecretRef == nil || !secrets[ef.SecretRef.Name] {
				keepFrom = append(keepFrom, ef)
				continue
			}
			ch := changeOf(c.Name)
			ch.MovedEnvFrom = append(ch.MovedEnvFrom, ef)
			if k := ef.Prefix + "\x00" + ef.SecretRef.Name; !fromSeen[k] {
				fromSeen[k] = true
				data.MovedEnvFrom = append(data.MovedEnvFrom, ef)
			}
		}
		c.EnvFrom = keepFrom
		var keepMounts []corev1.VolumeMount
		for _, m := range c.VolumeMounts {
			if _, cred := vols[m.Name]; !cred {
				keepMounts = append(keepMounts, m)
				continue
			}
			ch := changeOf(c.Name)
			ch.MovedVolumeMounts = append(ch.MovedVolumeMounts, m)
			volSeen[m.Name] = true
		}
		c.VolumeMounts = keepMounts
	}
	for _, v := range pod.Spec.Volumes { // pod volume order, not mount order: deterministic
		if volSeen[v.Name] {
			data.MovedVolumes = append(data.MovedVolumes, v.Name)
		}
	}
}

// SidecarURL is the URL an agent uses for server through the sidecar listening on port.
func SidecarURL(port int32, s v1alpha1.ToolServer) string {
	return fmt.Sprintf("http://127.0.0.1:%d/mcp/%s", port, s.Name)
}

// ServerURLEnv is the per-server variable name, ACTGATE_MCP_URL_<SERVER>.
func ServerURLEnv(server string) string {
	return ServerURLEnvPrefix + strings.ToUpper(strings.ReplaceAll(server, "-", "_"))
}

// rewriteURLs points agent containers at the sidecar (see Inject, step 4).
func rewriteURLs(pod *corev1.Pod, servers []v1alpha1.ToolServer, cfg *Config, changeOf func(string) *ContainerChange) {
	trim := func(s string) string { return strings.TrimRight(s, "/") }
	byURL := map[string]v1alpha1.ToolServer{}
	for _, s := range servers {
		byURL[trim(s.URL)] = s
	}
	for _, c := range agentContainers(pod) {
		set := func(name, value string) {
			idx := slices.IndexFunc(c.Env, func(v corev1.EnvVar) bool { return v.Name == name })
			ch := EnvChange{Name: name}
			if idx >= 0 {
				if c.Env[idx].Value == value && c.Env[idx].ValueFrom == nil {
					return
				}
				orig := c.Env[idx]
				ch.Original = &orig
				c.Env[idx] = corev1.EnvVar{Name: name, Value: value}
			} else {
				c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
			}
			cc := changeOf(c.Name)
			cc.Env = append(cc.Env, ch)
		}
		// Any literal value that is a protected server's URL: the agent's configured upstream.
		for _, e := range slices.Clone(c.Env) {
			if s, ok := byURL[trim(e.Value)]; ok && e.ValueFrom == nil && e.Value != "" {
				set(e.Name, SidecarURL(cfg.Port, s))
			}
		}
		// The configured MCP URL variables: with one server there is no doubt which it means.
		if len(servers) == 1 {
			for _, name := range cfg.URLEnv {
				set(name, SidecarURL(cfg.Port, servers[0]))
			}
		}
		for _, s := range servers {
			set(ServerURLEnv(s.Name), SidecarURL(cfg.Port, s))
		}
	}
}

// merge applies the rendered overlay to pod: init containers first, containers last, volumes
// appended, annotations the pod does not have added, labels set. Added names must start with "actgate-" and be new.
func merge(pod, overlay *corev1.Pod, st *Status) error {
	taken := map[string]bool{}
	for _, c := range agentContainers(pod) {
		taken[c.Name] = true
	}
	check := func(kind, name string) error {
		if !strings.HasPrefix(name, "actgate-") {
			return fmt.Errorf("%w: the sidecar template adds %s %q; injected names must start with \"actgate-\"", ErrNotInjectable, kind, name)
		}
		if taken[kind+"/"+name] || (kind != "volume" && taken[name]) {
			return fmt.Errorf("%w: %s %q already exists in the pod", ErrNotInjectable, kind, name)
		}
		taken[kind+"/"+name] = true
		return nil
	}
	for _, v := range pod.Spec.Volumes {
		taken["volume/"+v.Name] = true
	}
	for _, c := range overlay.Spec.InitContainers {
		if err := check("container", c.Name); err != nil {
			return err
		}
		st.InitContainers = append(st.InitContainers, c.Name)
	}
	for _, c := range overlay.Spec.Containers {
		if err := check("container", c.Name); err != nil {
			return err
		}
		st.Containers = append(st.Containers, c.Name)
	}
	for _, v := range overlay.Spec.Volumes {
		if err := check("volume", v.Name); err != nil {
			return err
		}
		st.Volumes = append(st.Volumes, v.Name)
	}
	pod.Spec.InitContainers = append(slices.Clone(overlay.Spec.InitContainers), pod.Spec.InitContainers...)
	pod.Spec.Containers = append(pod.Spec.Containers, overlay.Spec.Containers...)
	pod.Spec.Volumes = append(pod.Spec.Volumes, overlay.Spec.Volumes...)
	keys := make([]string, 0, len(overlay.Annotations))
	for k := range overlay.Annotations {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		if _, own := pod.Annotations[k]; own {
			// Never overwrite a user's annotation. The injector's own (actgate.io/status)
			// was removed by Strip, so it is set afresh.
			continue
		}
		pod.Annotations[k] = overlay.Annotations[k]
		st.Annotations = append(st.Annotations, k)
	}
	for k, v := range overlay.Labels {
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		pod.Labels[k] = v
	}
	return nil
}
