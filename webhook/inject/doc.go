// Package inject decides whether an agent pod gets the actgate sidecar and computes the injected
// pod. It is pure: no API server, no clock, no I/O, so the admission handler in package webhook
// is a thin shell around it and every decision here is covered by table and golden tests.
//
// The model is Istio's pkg/kube/inject and Linkerd's pkg/inject:
//
//   - InjectRequired(pod, ns, cfg) (bool, []Reason) decides from the actgate.io/inject label of
//     the namespace and the label or annotation of the pod, with a truth table in its comment.
//     Only "true" and "false" are values; the pod's label beats its annotation; a pod's opt-out
//     is honoured only in Config.OptOutNamespaces; Config.ExemptNamespaces are never touched.
//   - Select finds the ToolPolicies whose podSelector selects the pod; a candidate no policy
//     selects is not injected (the handler records an Event with the reason).
//   - Inject renders the sidecar from a template (sidecar.yaml.tmpl, overridable), merges it
//     into the pod as an overlay, records what it did in the actgate.io/status annotation, and
//     strips a previous injection first (Strip), so Inject(Inject(p)) == Inject(p).
//
// # What the sidecar gets, and what the agent loses (docs/architecture.md "Anti-bypass")
//
// The sidecar is a native sidecar (an init container with restartPolicy Always, Kubernetes ≥
// 1.29): it starts before every other container of the pod, including the pod's own init
// containers, and stops after them. It runs `actgate sidecar`, configured by environment:
//
//	ACTGATE_LISTEN                127.0.0.1:<port> (loopback only; default port 15080)
//	ACTGATE_POD_NAME, ACTGATE_POD_NAMESPACE, ACTGATE_POD_UID, ACTGATE_SERVICE_ACCOUNT (downward API)
//	ACTGATE_POLICIES              the selecting ToolPolicies, namespace/name, comma-separated
//	ACTGATE_SERVERS               the protected servers' names, comma-separated
//	ACTGATE_SERVER_URLS           the same as NAME=URL (spec.servers[].url), comma-separated
//	ACTGATE_SINK_ID               the policies' spec.sink.id, else <namespace>/<pod name>
//	ACTGATE_AUTHORITY_URL         the authority service
//	ACTGATE_AUTHORITY_TOKEN_FILE  a projected service-account token whose audience is
//	                              Config.AuthorityAudience (not the API server's), refreshed by
//	                              the kubelet
//	ACTGATE_AUTHORITY_CA          the authority's CA bundle and the PUBLIC KEY(s) verifying its
//	ACTGATE_AUTHORITY_PUBLIC_KEY  authorities, as PEM text, when the manager is configured with
//	                              them. A container's env is fixed at creation; pod annotations
//	                              (and a downwardAPI file of them) are not, and agent namespaces
//	                              hold no actgate Secret or ConfigMap, so the env is the one
//	                              place in the pod that the pod's owner cannot rewrite
//	ACTGATE_JOURNAL_DIR           the dispatch journal, an emptyDir
//	ACTGATE_CREDENTIALS_DIR       when a server has a credentialsSecretRef: <dir>/<server>/credential
//	ACTGATE_METRICS_BIND_ADDRESS  :<Config.MetricsPort> (default 9788; absent when metricsPort is 0)
//	ACTGATE_TRACING_ENDPOINT      Config.Tracing.Endpoint, when set (OTLP/HTTP traces URL)
//	ACTGATE_TRACING_SAMPLE_RATIO  Config.Tracing.SampleRatio, when set with an endpoint
//
// # Metrics
//
// Like Istio's and Linkerd's proxies, the sidecar is scrapeable: with Config.MetricsPort
// (default 9788, 0 disables) it serves Prometheus metrics at /metrics on every address of the
// pod, declared as the container port actgate-metrics (what a PodMonitor selects), and a pod
// gets prometheus.io/scrape "true", prometheus.io/port and prometheus.io/path /metrics (what
// Prometheus's kubernetes-pods job reads) only when it has no prometheus.io/ annotation of its
// own: a pod that configures its own scraping keeps that configuration whole, and the
// sidecar is then scraped through the named port. The overlay never overwrites an annotation
// the pod has. The metrics port must differ from Config.Port (Validate), and a pod declaring
// it is refused (ErrNotInjectable).
//
// Every reference an agent container (init or regular) makes to a Secret that a selecting
// policy names in servers[].credentialsSecretRef (env valueFrom.secretKeyRef, envFrom
// secretRef, a mount of a secret or projected volume carrying it) is removed from that
// container and given to the sidecar only: the env entries under their own names, volumes
// mounted under MovedDir/<volume>. Agent containers get ACTGATE_MCP_URL_<SERVER> for each
// server and have their MCP URL variable (Config.URLEnv, default MCP_SERVER_URL) and any
// variable whose value is a server's URL pointed at http://127.0.0.1:<port>/mcp/<server>.
//
// A pod the sidecar could not govern is refused rather than injected half-way
// (ErrNotInjectable): hostNetwork, shareProcessNamespace, the sidecar's port in use. So is a
// pod whose author uses what only the injector adds (CheckAuthored): a container, init or
// ephemeral container, volume or volume mount named actgate-…, a projected token for the
// authority's audience, or the actgate.io/status annotation. What is trusted in a pod is what
// the injector added, never a name or record its author wrote: a pod that carries injected
// parts (the injector's own output, when the API server reinvokes the webhook) is stripped and
// accepted only when injecting it gives exactly those parts back. Policies
// that cannot share one sidecar are refused too (ErrPolicy): two list the same server name, or
// name different sink ids.
//
// CredentialReferences finds credential references in a pod that is not injected (or in an
// ephemeral container added later); the handler refuses those, so the credential can never
// reach a container beside no sink.
package inject
