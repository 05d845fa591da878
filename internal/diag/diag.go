// Package diag names why an enforcing sidecar or a standalone gate is not ready, in stable
// reason codes, each with a sentence and the fix: the sidecar's readiness answer and its log
// lines, the kubelet's probe Events (the probe prints them), `kubectl actgate doctor` and
// `actgate doctor` all speak these codes, and docs/operations.md "Troubleshooting a pod that
// does not start" lists them.
package diag

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"slices"
	"sync"
	"time"
)

// Reason codes. They are part of the public interface: logs, probe output, Events and the
// doctor commands carry them, and docs/operations.md maps each to its fix.
const (
	// NotYetReceived: the sidecar has not received its pod's ToolPolicy from the authority
	// service yet (it has not answered, or not yet been asked).
	NotYetReceived = "NotYetReceived"
	// AuthorityUnreachable: the last request to the authority service failed before an answer
	// (no route, connection refused, DNS, timeout, a 5xx).
	AuthorityUnreachable = "AuthorityUnreachable"
	// AuthorityTLSFailure: the authority service's certificate did not verify against the CA
	// the sidecar was given (ACTGATE_AUTHORITY_CA).
	AuthorityTLSFailure = "AuthorityTLSFailure"
	// AuthorityRefused: the authority service refused the pod (4xx): its token was not
	// accepted, or no policy is served to it.
	AuthorityRefused = "AuthorityRefused"
	// AuthorityTooOld: the authority service answered at a review protocol level older than
	// the sidecar accepts (internal/review MinServiceLevel; no level at all from a service of a
	// release before levels), or refused the sidecar's level as too new: the control plane is
	// older than the sidecar (an upgrade rolling, or a rollback). Protected calls are refused
	// until a service of a good level answers; the sidecar recovers by itself.
	AuthorityTooOld = "AuthorityTooOld"
	// SidecarTooOld: the authority service refused the sidecar's review protocol level as older
	// than it serves (internal/review MinSidecarLevel): the pod runs a sidecar of a release the
	// control plane no longer serves.
	SidecarTooOld = "SidecarTooOld"
	// UpstreamUnreachable: an upstream MCP server accepts no TCP connection.
	UpstreamUnreachable = "UpstreamUnreachable"
	// UpstreamTLSFailure: an https upstream's certificate did not verify (system roots plus
	// the upstream CA, sidecar.upstreamCA).
	UpstreamTLSFailure = "UpstreamTLSFailure"
	// UpstreamBadURL: an upstream's URL does not parse as http(s).
	UpstreamBadURL = "UpstreamBadURL"
	// UpstreamRefused: the upstream answered the MCP initialize with a refusal (401 or 403:
	// the credential is missing or not accepted) or not as an MCP server.
	UpstreamRefused = "UpstreamRefused"
)

// Fix is the fix of each reason, in words with the command or value to change. A policy
// reason the authority service sends (review.NoPolicyReason) has its own message instead.
var Fix = map[string]string{
	NotYetReceived: "the sidecar is still asking the authority service; if this lasts, see the authority reason on the same line " +
		"(kubectl actgate doctor -n NAMESPACE POD)",
	AuthorityUnreachable: "check the authority service runs and has ready endpoints: " +
		"kubectl -n actgate-system get deploy,endpointslices -l app.kubernetes.io/component=authority; " +
		"a NetworkPolicy must let the pod reach it on 443",
	AuthorityTLSFailure: "the pod was created with another authority CA than the service now presents: " +
		"restart the pod (kubectl rollout restart) so the injector gives it the current CA",
	AuthorityRefused: "the service refused the pod's token or serves it no policy: check a ToolPolicy selects the pod " +
		"(kubectl get toolpolicies -n NAMESPACE, Ready reason Enforcing) and the pod's service account",
	AuthorityTooOld: "the control plane is older than this sidecar: upgrade it to the sidecar's release " +
		"(kubectl apply --server-side -f charts/actgate/crds; helm upgrade actgate charts/actgate -n actgate-system --reuse-values) " +
		"and wait for kubectl -n actgate-system rollout status deploy/actgate-authority; the sidecar waits, refusing protected calls, " +
		"and is ready again by itself once the service answers at its level",
	SidecarTooOld: "the control plane no longer serves this pod's sidecar: restart the pod " +
		"(kubectl rollout restart deployment/NAME -n NAMESPACE) so the injector gives it the current sidecar",
	UpstreamUnreachable: "check the ToolPolicy's spec.servers[].url names your MCP server and that it listens " +
		"(the sample's URL is a placeholder); a NetworkPolicy must let the pod reach it",
	UpstreamTLSFailure: "the upstream's certificate is not trusted: put its CA bundle in a ConfigMap in the pod's namespace " +
		"(kubectl create configmap upstream-ca -n NAMESPACE --from-file=ca.crt=ca.pem), name it in the chart " +
		"(helm upgrade … --set sidecar.upstreamCA.configMap=upstream-ca) and restart the pod; or fix the server's name or chain",
	UpstreamBadURL: "fix spec.servers[].url in the ToolPolicy: an http:// or https:// URL",
	UpstreamRefused: "the upstream refused the credential: check the Secret named by spec.servers[].credentialsSecretRef " +
		"(or the standalone config's credential) holds a token the server accepts",
}

// The reasons of a sidecar holding no policy that the authority service or the policy source
// give (review.PodPolicy's none.reason, policysource.Status.Reason); they have fixes too.
func init() {
	for reason, fix := range map[string]string{
		"NotGoverned": "no ToolPolicy selects this pod now: check spec.podSelector against the pod's labels " +
			"(kubectl get toolpolicies -n NAMESPACE -o yaml; kubectl get pod POD --show-labels)",
		"AmbiguousPolicy": "more than one ToolPolicy selects this pod and none is applied: narrow their podSelectors so exactly one does",
		"PolicyNotReady": "the ToolPolicy is not accepted at its current generation: kubectl get toolpolicies -n NAMESPACE " +
			"(ACCEPTED, READY and REASON) and kubectl describe toolpolicy NAME -n NAMESPACE",
		"PodNotFound":  "the service cannot find the pod its token names: restart the pod (kubectl delete pod POD -n NAMESPACE)",
		"Refused":      "the authority service refused the pod's token or request: see the authority reason on the same line",
		"CompileError": "the policy does not compile in this sidecar (an older sidecar than the control plane?): restart the pod",
		"SinkMismatch": "the policy names another spec.sink.id than the pod was injected for: restart the pod",
	} {
		Fix[reason] = fix
	}
}

// Problem is one reason a component is not ready.
type Problem struct {
	// Reason is a stable code (the constants above, or a policy reason the service sent).
	Reason string `json:"reason"`
	// Subject names what the reason is about: "authority", "policy" or an upstream's name.
	Subject string `json:"subject"`
	// Message says it in a sentence; never a credential or raw arguments.
	Message string `json:"message"`
	// Fix says what to do (Fix[Reason] when the code has one).
	Fix string `json:"fix,omitempty"`
}

// New returns the Problem of reason about subject, with the reason's fix.
func New(reason, subject, message string) Problem {
	return Problem{Reason: reason, Subject: subject, Message: message, Fix: Fix[reason]}
}

// TLSFailure reports whether err is a failed TLS handshake or certificate verification, as
// opposed to a connection that was never made.
func TLSFailure(err error) bool {
	if err == nil {
		return false
	}
	var (
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		record   tls.RecordHeaderError
		alert    tls.AlertError
	)
	return errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &hostname) ||
		errors.As(err, &invalid) || errors.As(err, &record) || errors.As(err, &alert)
}

// MaxLimiterKeys bounds the keys a Limiter remembers; past it the oldest half is forgotten
// (a forgotten key is allowed again, which only logs once more).
const MaxLimiterKeys = 256

// Limiter allows one event per key per period: a not-ready reason is logged at start and
// then at most once per period while it lasts.
type Limiter struct {
	period time.Duration
	mu     sync.Mutex
	last   map[string]time.Time
}

// NewLimiter returns a Limiter of one event per key per period.
func NewLimiter(period time.Duration) *Limiter {
	return &Limiter{period: period, last: map[string]time.Time{}}
}

// Allow reports whether key may be logged at now, and if so remembers it.
func (l *Limiter) Allow(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.last[key]; ok && now.Sub(t) < l.period {
		return false
	}
	if len(l.last) >= MaxLimiterKeys {
		l.forgetOldest()
	}
	l.last[key] = now
	return true
}

// Forget drops key, so its next occurrence is logged at once (the reason went away).
func (l *Limiter) Forget(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.last, key)
}

func (l *Limiter) forgetOldest() {
	times := make([]time.Time, 0, len(l.last))
	for _, t := range l.last {
		times = append(times, t)
	}
	slices.SortFunc(times, time.Time.Compare)
	cut := times[len(times)/2]
	for k, t := range l.last {
		if !t.After(cut) {
			delete(l.last, k)
		}
	}
}
