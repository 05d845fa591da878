package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/envelope"
)

// serviceAccountPrefix starts every service-account user name.
const serviceAccountPrefix = "system:serviceaccount:"

// BindingMomentValidator is where docs/architecture.md "Principals" becomes true: a BindingMoment's
// resolution is admitted once, only from the Kubernetes user the moment names as principal
// (admission userInfo), only if it passes the resolution rules of envelope-04 §7.3 against the
// stored envelope, and never from the agent that initiated the act or any service account of
// the moment's namespace. The CRD's CEL rules already make the envelope, its digest, the
// principal and a written resolution immutable; this handler repeats the spec immutability
// check (defence in depth) and does what needs the request's user, the clock, the envelope
// parser or the Act.
//
// The checks, each a denial with the reason:
//
// On CREATE (written by the authority service):
//   - the envelope parses under the strict profile and the envelope-04 §4–§5 grammar, is
//     stored in its JCS canonical form (§6.1), and envelopeDigest is its digest (§6.2);
//   - synopsis equals the envelope's synopsis slot;
//   - no resolution yet: only the principal writes one, later;
//   - the principal is not a service account of the namespace, and the Act named by actRef
//     exists and its spec.agent is not the principal (the agent never decides its own act).
//
// On UPDATE of the object:
//   - nothing in spec but resolution changes, and a resolution once written never changes
//     (accepted once, §7.3 "naming one already resolved, is not a decision");
//   - a new resolution comes from userInfo.username == spec.principal, who is not the Act's
//     agent nor a service account of the namespace;
//   - resolution.via's issuer, subject and authTime, each when set, equal what the API
//     server's authenticator recorded for the request in userInfo.extra (ExtraOIDCIssuer,
//     ExtraOIDCSubject, ExtraAuthTime): they say how the principal authenticated, which the
//     client cannot invent (docs/security.md "Resolution audit"); via.surface is the client's
//     own word and only bounded by the CRD;
//   - the moment has not expired (spec.expiresAt, status.state) at admission time;
//   - the resolution, in its §7.3 wire form, passes envelope.ParseResolution and
//     envelope.Verify against the envelope parsed from the stored bytes: it names the envelope's
//     digest (§12.5) and an option index within range.
//
// On UPDATE of status (the controller's): status.resolvedBy, when set, is spec.principal and
// a resolution exists; status.resolvedVia, when set, is spec.resolution.via; state Resolved
// requires a resolution. The controller records resolvedBy
// as spec.principal, which this handler has made the only possible resolver.
type BindingMomentValidator struct {
	// APIReader reads the Act named by actRef, uncached: the authority service creates the Act
	// and then the moment, and a cache may not have the Act yet.
	APIReader client.Reader
	// Now is the clock expiry is judged by.
	Now func() time.Time
}

var _ admission.Validator[*v1alpha1.BindingMoment] = (*BindingMomentValidator)(nil)

// Sentinel errors; every denial wraps one (the message is the API server's reply).
var (
	// ErrNotPrincipal: the user writing the resolution is not spec.principal.
	ErrNotPrincipal = errors.New("only the principal named in spec.principal may resolve this binding moment")
	// ErrSelfResolution: the agent (or a service account of the namespace) is or would be
	// the resolver.
	ErrSelfResolution = errors.New("an agent may never resolve its own escalation")
	// ErrAlreadyResolved: the moment already has a resolution.
	ErrAlreadyResolved = errors.New("binding moment already resolved; a resolution is accepted once")
	// ErrExpired: the moment expired unresolved.
	ErrExpired = errors.New("binding moment expired")
	// ErrInvalidResolution: the resolution fails envelope-04 §7.3.
	ErrInvalidResolution = errors.New("resolution rejected (envelope-04 §7.3)")
	// ErrInvalidEnvelope: the stored envelope is not a valid, canonical envelope with the
	// recorded digest.
	ErrInvalidEnvelope = errors.New("envelope rejected (envelope-04 §4–§6)")
	// ErrActNotFound: spec.actRef names no Act, so the agent cannot be told apart from the
	// principal (fail closed).
	ErrActNotFound = errors.New("the Act this binding moment decides does not exist")
	// ErrImmutable: a field other than spec.resolution changed.
	ErrImmutable = errors.New("binding moment spec is immutable except for adding spec.resolution")
	// ErrUnverifiedVia: resolution.via names an issuer, subject or authentication time the
	// API server did not authenticate the request with.
	ErrUnverifiedVia = errors.New("resolution.via must match the authentication the API server recorded for this request")
)

// The userInfo.extra keys the API server's JWT authenticator maps an OpenID Connect ID token's
// claims into (the AuthenticationConfiguration's claimMappings.extra; docs/operations.md).
const (
	// ExtraOIDCIssuer carries the ID token's iss.
	ExtraOIDCIssuer = "actgate.io/oidc-issuer"
	// ExtraOIDCSubject carries the ID token's sub.
	ExtraOIDCSubject = "actgate.io/oidc-subject"
	// ExtraAuthTime carries the ID token's auth_time as canonical decimal Unix seconds; absent
	// when the token has none. The authenticator decodes JSON numbers as CEL doubles, so the
	// mapping is string(int(claims.auth_time)) (docs/api.md "Resolution audit (`spec.resolution.via`)").
	ExtraAuthTime = "actgate.io/auth-time"
)

// ValidateCreate implements admission.Validator.
func (v *BindingMomentValidator) ValidateCreate(ctx context.Context, bm *v1alpha1.BindingMoment) (admission.Warnings, error) {
	env, err := parseStored(bm)
	if err != nil {
		return nil, err
	}
	if got := env.Content().Synopsis; got != bm.Spec.Synopsis {
		return nil, fmt.Errorf("%w: spec.synopsis must equal the envelope's synopsis slot (envelope-04 §5.1)", ErrInvalidEnvelope)
	}
	if bm.Spec.Resolution != nil {
		return nil, fmt.Errorf("%w: a binding moment is created unresolved; %s writes spec.resolution afterwards", ErrNotPrincipal, bm.Spec.Principal)
	}
	if isNamespaceServiceAccount(bm.Spec.Principal, bm.Namespace) {
		return nil, fmt.Errorf("%w: principal %s is a service account of namespace %s", ErrSelfResolution, bm.Spec.Principal, bm.Namespace)
	}
	agent, err := v.agentOf(ctx, bm)
	if err != nil {
		return nil, err
	}
	if agent == bm.Spec.Principal {
		return nil, fmt.Errorf("%w: principal %s is the agent that initiated Act %s", ErrSelfResolution, bm.Spec.Principal, bm.Spec.ActRef.Name)
	}
	return nil, nil
}

// ValidateUpdate implements admission.Validator.
func (v *BindingMomentValidator) ValidateUpdate(ctx context.Context, old, bm *v1alpha1.BindingMoment) (admission.Warnings, error) {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("actgate: %w", err)
	}
	if req.SubResource == "status" {
		return nil, validateStatus(bm)
	}

	// Everything but resolution is immutable (the CRD says so too).
	a, b := old.Spec.DeepCopy(), bm.Spec.DeepCopy()
	a.Resolution, b.Resolution = nil, nil
	if !apiequality.Semantic.DeepEqual(a, b) {
		return nil, ErrImmutable
	}
	switch {
	case old.Spec.Resolution != nil && !apiequality.Semantic.DeepEqual(old.Spec.Resolution, bm.Spec.Resolution):
		return nil, fmt.Errorf("%w (by %s)", ErrAlreadyResolved, old.Spec.Principal)
	case old.Spec.Resolution != nil || bm.Spec.Resolution == nil:
		return nil, nil // metadata or no-op: no new resolution
	}

	// A new resolution.
	user := req.UserInfo.Username
	if user == "" {
		return nil, errNoUser
	}
	if user != bm.Spec.Principal {
		return nil, fmt.Errorf("%w: %s is not %s", ErrNotPrincipal, user, bm.Spec.Principal)
	}
	if isNamespaceServiceAccount(user, bm.Namespace) {
		return nil, fmt.Errorf("%w: %s is a service account of namespace %s", ErrSelfResolution, user, bm.Namespace)
	}
	agent, err := v.agentOf(ctx, bm)
	if err != nil {
		return nil, err
	}
	if user == agent {
		return nil, fmt.Errorf("%w: %s initiated Act %s", ErrSelfResolution, user, bm.Spec.ActRef.Name)
	}
	if err := checkVia(bm.Spec.Resolution.Via, req.UserInfo.Extra); err != nil {
		return nil, err
	}
	if now := v.Now(); !now.Before(bm.Spec.ExpiresAt.Time) {
		return nil, fmt.Errorf("%w at %s", ErrExpired, bm.Spec.ExpiresAt.UTC().Format(time.RFC3339))
	}
	if s := old.Status.State; s != "" && s != v1alpha1.BindingMomentPending {
		return nil, fmt.Errorf("%w: state is %s", ErrExpired, s)
	}
	env, err := parseStored(old)
	if err != nil {
		return nil, err
	}
	if err := checkResolution(env, bm.Spec.Resolution); err != nil {
		return nil, err
	}
	return nil, nil
}

// ValidateDelete implements admission.Validator.
func (v *BindingMomentValidator) ValidateDelete(context.Context, *v1alpha1.BindingMoment) (admission.Warnings, error) {
	return nil, nil
}

// parseStored parses spec.envelope and checks it is canonical and has spec.envelopeDigest.
func parseStored(bm *v1alpha1.BindingMoment) (*envelope.Envelope, error) {
	env, err := envelope.Parse([]byte(bm.Spec.Envelope))
	if err != nil {
		return nil, fmt.Errorf("%w: spec.envelope: %s", ErrInvalidEnvelope, codedProblems(err))
	}
	if string(env.Canonical()) != bm.Spec.Envelope {
		return nil, fmt.Errorf("%w: spec.envelope must be stored in its RFC 8785 canonical form (envelope-04 §6.1), so its bytes reproduce its digest", ErrInvalidEnvelope)
	}
	if env.Digest() != string(bm.Spec.EnvelopeDigest) {
		return nil, fmt.Errorf("%w: spec.envelopeDigest is %s but the envelope's digest is %s (envelope-04 §6.2)", ErrInvalidEnvelope, bm.Spec.EnvelopeDigest, env.Digest())
	}
	return env, nil
}

// checkResolution runs the resolution through the §7.3 parser in its wire form (so every rule
// of the member set applies, not only those the CRD expresses) and verifies it against env. The
// wire form keeps what was present: option_idx only if set, answer only if non-empty (the CRD
// cannot tell an empty answer from none), so an option without an index or a decline with one is
// refused rather than read as index 0.
func checkResolution(env *envelope.Envelope, r *v1alpha1.BindingMomentResolution) error {
	wire := map[string]any{"envelope_digest": string(r.EnvelopeDigest), "resolution": string(r.Kind)}
	if r.OptionIdx != nil {
		wire["option_idx"] = *r.OptionIdx
	}
	if r.Answer != "" {
		wire["answer"] = r.Answer
	}
	raw, err := json.Marshal(map[string]any{envelope.MemberResolution: wire})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidResolution, err)
	}
	parsed, err := envelope.ParseResolution(raw)
	if err != nil {
		return fmt.Errorf("%w: %s", ErrInvalidResolution, codedProblems(err))
	}
	if err := envelope.Verify(env, parsed); err != nil {
		return fmt.Errorf("%w: %s", ErrInvalidResolution, codedProblems(err))
	}
	return nil
}

// checkVia admits via's issuer, subject and authTime only when each equals the single value of
// its userInfo.extra key: a field set while the request carries no such value (it was not
// authenticated by an ID token mapped to it), carries several, or carries another is refused.
// via.surface is not checked: it is the client's own word.
func checkVia(via *v1alpha1.ResolutionVia, extra map[string]authenticationv1.ExtraValue) error {
	if via == nil {
		return nil
	}
	if via.Issuer != "" {
		if err := extraEquals(extra, ExtraOIDCIssuer, "issuer", via.Issuer); err != nil {
			return err
		}
	}
	if via.Subject != "" {
		if err := extraEquals(extra, ExtraOIDCSubject, "subject", via.Subject); err != nil {
			return err
		}
	}
	if via.AuthTime != nil {
		v, err := extraValue(extra, ExtraAuthTime, "authTime")
		if err != nil {
			return err
		}
		secs, ok := unixSeconds(v)
		if !ok {
			return fmt.Errorf("%w: the request's %s is not decimal Unix seconds", ErrUnverifiedVia, ExtraAuthTime)
		}
		if got := via.AuthTime.Time; got.Unix() != secs || got.Nanosecond() != 0 {
			return fmt.Errorf("%w: spec.resolution.via.authTime is %s but the request authenticated at %s",
				ErrUnverifiedVia, got.UTC().Format(time.RFC3339), time.Unix(secs, 0).UTC().Format(time.RFC3339))
		}
	}
	return nil
}

// extraEquals checks the request's one value of key is want.
func extraEquals(extra map[string]authenticationv1.ExtraValue, key, field, want string) error {
	v, err := extraValue(extra, key, field)
	if err != nil {
		return err
	}
	if v != want {
		return fmt.Errorf("%w: spec.resolution.via.%s differs from the request's %s", ErrUnverifiedVia, field, key)
	}
	return nil
}

// extraValue is the request's one value of key; none or several is a refusal of field.
func extraValue(extra map[string]authenticationv1.ExtraValue, key, field string) (string, error) {
	vs := extra[key]
	switch len(vs) {
	case 0:
		return "", fmt.Errorf("%w: spec.resolution.via.%s is set but the request carries no %s (it was not authenticated by an OpenID Connect ID token)",
			ErrUnverifiedVia, field, key)
	case 1:
		return vs[0], nil
	}
	return "", fmt.Errorf("%w: the request carries %d values of %s", ErrUnverifiedVia, len(vs), key)
}

// unixSeconds parses decimal Unix seconds in their one canonical spelling: ASCII digits (no
// sign, space or leading zero), at most 12 of them (beyond the year 33658).
func unixSeconds(s string) (int64, bool) {
	if s == "" || len(s) > 12 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && strconv.FormatInt(n, 10) == s
}

func validateStatus(bm *v1alpha1.BindingMoment) error {
	st := bm.Status
	if st.ResolvedBy != "" && (st.ResolvedBy != bm.Spec.Principal || bm.Spec.Resolution == nil) {
		return fmt.Errorf("%w: status.resolvedBy must be spec.principal (%s) and needs spec.resolution", ErrNotPrincipal, bm.Spec.Principal)
	}
	if st.ResolvedVia != nil && (bm.Spec.Resolution == nil || !apiequality.Semantic.DeepEqual(st.ResolvedVia, bm.Spec.Resolution.Via)) {
		return fmt.Errorf("%w: status.resolvedVia must be spec.resolution.via", ErrUnverifiedVia)
	}
	if st.State == v1alpha1.BindingMomentResolved && bm.Spec.Resolution == nil {
		return fmt.Errorf("%w: status.state Resolved needs spec.resolution", ErrInvalidResolution)
	}
	return nil
}

// agentOf returns the spec.agent of the Act the moment decides. A missing Act is a denial: a
// moment that decides nothing known cannot be checked against its agent (fail closed).
func (v *BindingMomentValidator) agentOf(ctx context.Context, bm *v1alpha1.BindingMoment) (string, error) {
	act := &v1alpha1.Act{}
	err := v.APIReader.Get(ctx, client.ObjectKey{Namespace: bm.Namespace, Name: bm.Spec.ActRef.Name}, act)
	switch {
	case apierrors.IsNotFound(err):
		return "", fmt.Errorf("%w: spec.actRef names Act %s in namespace %s", ErrActNotFound, bm.Spec.ActRef.Name, bm.Namespace)
	case err != nil:
		return "", apierrors.NewInternalError(fmt.Errorf("actgate: read Act %s: %w", bm.Spec.ActRef.Name, err))
	}
	return act.Spec.Agent, nil
}

func isNamespaceServiceAccount(user, namespace string) bool {
	return strings.HasPrefix(user, serviceAccountPrefix+namespace+":")
}

// codedProblems renders an envelope error as "CODE path: detail; …" (the stable codes of
// internal/envelope).
func codedProblems(err error) string {
	ps := envelope.ProblemsOf(err)
	if len(ps) == 0 {
		return err.Error()
	}
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.String()
	}
	return strings.Join(parts, "; ")
}
