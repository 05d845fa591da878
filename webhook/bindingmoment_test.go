package webhook

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/actgate/actgate/api/v1alpha1"
)

const agentSA = "system:serviceaccount:billing:billing-agent"

func momentValidator(t testing.TB, now time.Time) *BindingMomentValidator {
	act := &v1alpha1.Act{ObjectMeta: metav1.ObjectMeta{Namespace: "billing", Name: "send-payment-inv-2291"},
		Spec: v1alpha1.ActSpec{Agent: agentSA}}
	return &BindingMomentValidator{APIReader: reader(t, act), Now: func() time.Time { return now }}
}

// TestResolutionAdmission: who may write a resolution, when, and which (docs/architecture.md
// "Principals", envelope-04 §7.3, §12.5). The API server's CRD rules are not in play here, so each
// of the webhook's own checks is seen on its own.
func TestResolutionAdmission(t *testing.T) {
	base := sampleMoment(t)
	base.Spec.ExpiresAt = metav1.NewTime(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	now := time.Date(2029, 6, 1, 0, 0, 0, 0, time.UTC)
	digest := base.Spec.EnvelopeDigest
	option := func(i int32) *v1alpha1.BindingMomentResolution {
		return &v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionOption, OptionIdx: &i, EnvelopeDigest: digest}
	}
	for _, tc := range []struct {
		name   string
		user   string
		old    func(*v1alpha1.BindingMoment)
		new    func(*v1alpha1.BindingMoment)
		now    time.Time
		want   error // nil = admitted
		detail string
	}{
		{name: "the principal selects an option", user: "alice@example.com", new: func(b *v1alpha1.BindingMoment) { b.Spec.Resolution = option(1) }},
		{name: "the principal answers", user: "alice@example.com", new: func(b *v1alpha1.BindingMoment) {
			b.Spec.Resolution = &v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionAnswer, Answer: "Pay half now.", EnvelopeDigest: digest}
		}},
		{name: "the principal declines", user: "alice@example.com", new: func(b *v1alpha1.BindingMoment) {
			b.Spec.Resolution = &v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionDeclined, EnvelopeDigest: digest}
		}},
		{name: "the principal questions", user: "alice@example.com", new: func(b *v1alpha1.BindingMoment) {
			b.Spec.Resolution = &v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionQuestion, EnvelopeDigest: digest}
		}},
		{name: "another user", user: "bob@example.com", new: func(b *v1alpha1.BindingMoment) { b.Spec.Resolution = option(1) },
			want: ErrNotPrincipal, detail: "bob@example.com is not alice@example.com"},
		{name: "the agent's service account", user: agentSA, new: func(b *v1alpha1.BindingMoment) { b.Spec.Resolution = option(1) },
			want: ErrNotPrincipal},
		{name: "the agent named as principal (stored before the webhook existed)", user: agentSA,
			old:  func(b *v1alpha1.BindingMoment) { b.Spec.Principal = agentSA },
			new:  func(b *v1alpha1.BindingMoment) { b.Spec.Principal = agentSA; b.Spec.Resolution = option(1) },
			want: ErrSelfResolution},
		{name: "a peer service account of the namespace named as principal", user: "system:serviceaccount:billing:helper",
			old: func(b *v1alpha1.BindingMoment) { b.Spec.Principal = "system:serviceaccount:billing:helper" },
			new: func(b *v1alpha1.BindingMoment) {
				b.Spec.Principal = "system:serviceaccount:billing:helper"
				b.Spec.Resolution = option(1)
			},
			want: ErrSelfResolution},
		{name: "a resolution naming another envelope (§12.5)", user: "alice@example.com", new: func(b *v1alpha1.BindingMoment) {
			b.Spec.Resolution = option(1)
			b.Spec.Resolution.EnvelopeDigest = "sha256:" + v1alpha1.Digest(strings.Repeat("0", 64))
		}, want: ErrInvalidResolution, detail: "RES_ENVELOPE_MISMATCH"},
		{name: "an option index beyond the envelope's options", user: "alice@example.com", new: func(b *v1alpha1.BindingMoment) { b.Spec.Resolution = option(2) },
			want: ErrInvalidResolution, detail: "option_idx"},
		{name: "an answer with a bidi override", user: "alice@example.com", new: func(b *v1alpha1.BindingMoment) {
			b.Spec.Resolution = &v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionAnswer, Answer: "pay \u202e0001", EnvelopeDigest: digest}
		}, want: ErrInvalidResolution},
		{name: "an option without an index", user: "alice@example.com", new: func(b *v1alpha1.BindingMoment) {
			b.Spec.Resolution = &v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionOption, EnvelopeDigest: digest}
		}, want: ErrInvalidResolution},
		{name: "at expiry", user: "alice@example.com", now: base.Spec.ExpiresAt.Time, new: func(b *v1alpha1.BindingMoment) { b.Spec.Resolution = option(1) },
			want: ErrExpired},
		{name: "marked expired by the controller", user: "alice@example.com",
			old: func(b *v1alpha1.BindingMoment) { b.Status.State = v1alpha1.BindingMomentExpired },
			new: func(b *v1alpha1.BindingMoment) { b.Spec.Resolution = option(1) }, want: ErrExpired},
		{name: "a second, different resolution", user: "alice@example.com",
			old: func(b *v1alpha1.BindingMoment) { b.Spec.Resolution = option(1) },
			new: func(b *v1alpha1.BindingMoment) { b.Spec.Resolution = option(0) }, want: ErrAlreadyResolved},
		{name: "removing the resolution", user: "alice@example.com",
			old: func(b *v1alpha1.BindingMoment) { b.Spec.Resolution = option(1) },
			new: func(b *v1alpha1.BindingMoment) { b.Spec.Resolution = nil }, want: ErrAlreadyResolved},
		{name: "the same resolution again (a no-op update, e.g. a label)", user: "bob@example.com",
			old: func(b *v1alpha1.BindingMoment) { b.Spec.Resolution = option(1) },
			new: func(b *v1alpha1.BindingMoment) { b.Spec.Resolution = option(1); b.Labels = map[string]string{"x": "y"} }},
		{name: "a metadata-only update of an unresolved moment", user: "bob@example.com", new: func(b *v1alpha1.BindingMoment) { b.Labels = map[string]string{"x": "y"} }},
		{name: "changing the principal with the resolution", user: "bob@example.com", new: func(b *v1alpha1.BindingMoment) {
			b.Spec.Principal = "bob@example.com"
			b.Spec.Resolution = option(1)
		}, want: ErrImmutable},
		{name: "changing the envelope", user: "alice@example.com", new: func(b *v1alpha1.BindingMoment) { b.Spec.Synopsis = "Other." }, want: ErrImmutable},
		{name: "no user", user: "", new: func(b *v1alpha1.BindingMoment) { b.Spec.Resolution = option(1) }, want: errNoUser},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := base.DeepCopy()
			if tc.old != nil {
				tc.old(old)
			}
			nw := old.DeepCopy()
			tc.new(nw)
			clock := now
			if !tc.now.IsZero() {
				clock = tc.now
			}
			_, err := momentValidator(t, clock).ValidateUpdate(asUser(tc.user, ""), old, nw)
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("err = %v, want %v", err, tc.want)
			case tc.want != nil && !strings.Contains(err.Error(), tc.detail):
				t.Fatalf("err = %v, want it to mention %q", err, tc.detail)
			}
		})
	}
}

func TestMomentCreationAdmission(t *testing.T) {
	v := momentValidator(t, time.Now())
	for _, tc := range []struct {
		name   string
		mutate func(*v1alpha1.BindingMoment)
		want   error
	}{
		{"the sample", func(*v1alpha1.BindingMoment) {}, nil},
		{"principal is the act's agent", func(b *v1alpha1.BindingMoment) { b.Spec.Principal = agentSA }, ErrSelfResolution},
		{"principal is another namespace's service account but the agent", func(b *v1alpha1.BindingMoment) {
			b.Namespace = "other"
		}, ErrActNotFound},
		{"envelope reordered (not canonical)", func(b *v1alpha1.BindingMoment) {
			b.Spec.Envelope = strings.Replace(b.Spec.Envelope, `{"findings"`, `{ "findings"`, 1)
		}, ErrInvalidEnvelope},
		{"envelope with a duplicate member", func(b *v1alpha1.BindingMoment) {
			b.Spec.Envelope = strings.Replace(b.Spec.Envelope, `{"findings"`, `{"offer":"x","findings"`, 1)
		}, ErrInvalidEnvelope},
		{"created resolved", func(b *v1alpha1.BindingMoment) {
			b.Spec.Resolution = &v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionDeclined, EnvelopeDigest: b.Spec.EnvelopeDigest}
		}, ErrNotPrincipal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := sampleMoment(t)
			tc.mutate(b)
			_, err := v.ValidateCreate(context.Background(), b)
			if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("ValidateCreate = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestMomentStatusAdmission(t *testing.T) {
	v := momentValidator(t, time.Now())
	resolved := sampleMoment(t)
	resolved.Spec.Resolution = &v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionDeclined, EnvelopeDigest: resolved.Spec.EnvelopeDigest}
	resolvedVia := resolved.DeepCopy()
	resolvedVia.Spec.Resolution.Via = &v1alpha1.ResolutionVia{Surface: "kubectl"}
	for _, tc := range []struct {
		name   string
		bm     *v1alpha1.BindingMoment
		status v1alpha1.BindingMomentStatus
		ok     bool
	}{
		{"resolvedBy the principal", resolved, v1alpha1.BindingMomentStatus{State: v1alpha1.BindingMomentResolved, ResolvedBy: "alice@example.com"}, true},
		{"resolvedBy someone else", resolved, v1alpha1.BindingMomentStatus{State: v1alpha1.BindingMomentResolved, ResolvedBy: "bob@example.com"}, false},
		{"resolvedBy without a resolution", sampleMoment(t), v1alpha1.BindingMomentStatus{ResolvedBy: "alice@example.com"}, false},
		{"Resolved without a resolution", sampleMoment(t), v1alpha1.BindingMomentStatus{State: v1alpha1.BindingMomentResolved}, false},
		{"Expired without a resolution", sampleMoment(t), v1alpha1.BindingMomentStatus{State: v1alpha1.BindingMomentExpired}, true},
		{"resolvedVia as the resolution's via", resolvedVia, v1alpha1.BindingMomentStatus{State: v1alpha1.BindingMomentResolved,
			ResolvedBy: "alice@example.com", ResolvedVia: &v1alpha1.ResolutionVia{Surface: "kubectl"}}, true},
		{"resolvedVia other than the resolution's via", resolvedVia, v1alpha1.BindingMomentStatus{State: v1alpha1.BindingMomentResolved,
			ResolvedBy: "alice@example.com", ResolvedVia: &v1alpha1.ResolutionVia{Surface: "kubectl", Issuer: "https://idp.example.com"}}, false},
		{"resolvedVia when the resolution has none", resolved, v1alpha1.BindingMomentStatus{State: v1alpha1.BindingMomentResolved,
			ResolvedBy: "alice@example.com", ResolvedVia: &v1alpha1.ResolutionVia{Surface: "kubectl"}}, false},
		{"resolvedVia without a resolution", sampleMoment(t), v1alpha1.BindingMomentStatus{ResolvedVia: &v1alpha1.ResolutionVia{Surface: "kubectl"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nw := tc.bm.DeepCopy()
			nw.Status = tc.status
			_, err := v.ValidateUpdate(asUser("system:serviceaccount:actgate-system:actgate-manager", "status"), tc.bm, nw)
			if (err == nil) != tc.ok {
				t.Fatalf("status update = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

// oidcExtra is the userInfo.extra the API server's JWT authenticator records for an ID token
// of issuer and subject authenticated at authTime (Unix seconds; "" leaves it out, as for a
// token without auth_time).
func oidcExtra(issuer, subject, authTime string) map[string]authenticationv1.ExtraValue {
	e := map[string]authenticationv1.ExtraValue{ExtraOIDCIssuer: {issuer}, ExtraOIDCSubject: {subject}}
	if authTime != "" {
		e[ExtraAuthTime] = authenticationv1.ExtraValue{authTime}
	}
	return e
}

// TestResolutionViaAdmission: resolution.via's issuer, subject and authTime are admitted only
// as the API server authenticated the request (userInfo.extra); surface is the client's word
// (docs/security.md "Resolution audit").
func TestResolutionViaAdmission(t *testing.T) {
	base := sampleMoment(t)
	base.Spec.ExpiresAt = metav1.NewTime(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	now := time.Date(2029, 6, 1, 0, 0, 0, 0, time.UTC)
	const iss, sub = "https://idp.example.com", "248289761001"
	signedIn := time.Date(2029, 6, 1, 0, 0, 0, 0, time.UTC).Add(-3 * time.Minute)
	at := func(t time.Time) *metav1.Time { m := metav1.NewTime(t); return &m }
	unix := strconv.FormatInt(signedIn.Unix(), 10)
	full := v1alpha1.ResolutionVia{Surface: "approval-service", Issuer: iss, Subject: sub, AuthTime: at(signedIn)}
	with := func(f func(*v1alpha1.ResolutionVia)) *v1alpha1.ResolutionVia { v := full; f(&v); return &v }
	for _, tc := range []struct {
		name   string
		via    *v1alpha1.ResolutionVia
		extra  map[string]authenticationv1.ExtraValue
		want   error // nil = admitted
		detail string
	}{
		{name: "no via, no extra", via: nil},
		{name: "no via from an OIDC-authenticated request", via: nil, extra: oidcExtra(iss, sub, unix)},
		{name: "surface only, no extra (kubectl, the console)", via: &v1alpha1.ResolutionVia{Surface: "kubectl"}},
		{name: "everything matching", via: &full, extra: oidcExtra(iss, sub, unix)},
		{name: "issuer and subject of a token without auth_time", via: with(func(v *v1alpha1.ResolutionVia) { v.AuthTime = nil }),
			extra: oidcExtra(iss, sub, "")},
		{name: "surface unchecked against the extra", via: with(func(v *v1alpha1.ResolutionVia) { v.Surface = "console" }), extra: oidcExtra(iss, sub, unix)},
		{name: "issuer without the extra (a client certificate or token user)", via: &v1alpha1.ResolutionVia{Issuer: iss},
			want: ErrUnverifiedVia, detail: "carries no " + ExtraOIDCIssuer},
		{name: "subject without the extra", via: &v1alpha1.ResolutionVia{Subject: sub}, want: ErrUnverifiedVia, detail: "carries no " + ExtraOIDCSubject},
		{name: "authTime without the extra", via: &v1alpha1.ResolutionVia{AuthTime: at(signedIn)}, want: ErrUnverifiedVia, detail: "carries no " + ExtraAuthTime},
		{name: "authTime claimed from a token without auth_time", via: &full, extra: oidcExtra(iss, sub, ""),
			want: ErrUnverifiedVia, detail: "carries no " + ExtraAuthTime},
		{name: "forged issuer", via: with(func(v *v1alpha1.ResolutionVia) { v.Issuer = "https://evil.example.com" }), extra: oidcExtra(iss, sub, unix),
			want: ErrUnverifiedVia, detail: "via.issuer differs"},
		{name: "issuer differing by a trailing slash", via: with(func(v *v1alpha1.ResolutionVia) { v.Issuer = iss + "/" }), extra: oidcExtra(iss, sub, unix),
			want: ErrUnverifiedVia, detail: "via.issuer differs"},
		{name: "forged subject", via: with(func(v *v1alpha1.ResolutionVia) { v.Subject = "1" }), extra: oidcExtra(iss, sub, unix),
			want: ErrUnverifiedVia, detail: "via.subject differs"},
		{name: "a fresher authTime than the authentication (step-up forged)", via: with(func(v *v1alpha1.ResolutionVia) { v.AuthTime = at(now) }),
			extra: oidcExtra(iss, sub, unix), want: ErrUnverifiedVia, detail: "authenticated at " + signedIn.UTC().Format(time.RFC3339)},
		{name: "authTime a second off", via: with(func(v *v1alpha1.ResolutionVia) { v.AuthTime = at(signedIn.Add(time.Second)) }),
			extra: oidcExtra(iss, sub, unix), want: ErrUnverifiedVia},
		{name: "authTime with a fraction of a second", via: with(func(v *v1alpha1.ResolutionVia) { v.AuthTime = at(signedIn.Add(time.Millisecond)) }),
			extra: oidcExtra(iss, sub, unix), want: ErrUnverifiedVia},
		{name: "two issuers in the extra", via: &full,
			extra: map[string]authenticationv1.ExtraValue{ExtraOIDCIssuer: {iss, iss}, ExtraOIDCSubject: {sub}, ExtraAuthTime: {unix}},
			want:  ErrUnverifiedVia, detail: "2 values of " + ExtraOIDCIssuer},
		{name: "an empty extra list", via: &full,
			extra: map[string]authenticationv1.ExtraValue{ExtraOIDCIssuer: {}, ExtraOIDCSubject: {sub}, ExtraAuthTime: {unix}},
			want:  ErrUnverifiedVia, detail: "carries no " + ExtraOIDCIssuer},
		{name: "auth-time extra not decimal", via: &full, extra: oidcExtra(iss, sub, "0x6"), want: ErrUnverifiedVia, detail: "not decimal Unix seconds"},
		{name: "auth-time extra signed", via: &full, extra: oidcExtra(iss, sub, "+"+unix), want: ErrUnverifiedVia, detail: "not decimal Unix seconds"},
		{name: "auth-time extra RFC 3339", via: &full, extra: oidcExtra(iss, sub, signedIn.Format(time.RFC3339)), want: ErrUnverifiedVia},
		{name: "auth-time extra with a leading zero", via: &full, extra: oidcExtra(iss, sub, "0"+unix), want: ErrUnverifiedVia, detail: "not decimal Unix seconds"},
		{name: "auth-time extra fractional", via: &full, extra: oidcExtra(iss, sub, unix+".0"), want: ErrUnverifiedVia},
		{name: "auth-time extra too long", via: &full, extra: oidcExtra(iss, sub, strings.Repeat("9", 20)), want: ErrUnverifiedVia},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nw := base.DeepCopy()
			nw.Spec.Resolution = &v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionDeclined, EnvelopeDigest: base.Spec.EnvelopeDigest, Via: tc.via}
			_, err := momentValidator(t, now).ValidateUpdate(asUserWithExtra("alice@example.com", tc.extra), base, nw)
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("err = %v, want %v", err, tc.want)
			case tc.want != nil && !strings.Contains(err.Error(), tc.detail):
				t.Fatalf("err = %v, want it to mention %q", err, tc.detail)
			}
		})
	}
	// The principal checks come first: bob's matching extras do not make him alice.
	nw := base.DeepCopy()
	nw.Spec.Resolution = &v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionDeclined, EnvelopeDigest: base.Spec.EnvelopeDigest, Via: &full}
	if _, err := momentValidator(t, now).ValidateUpdate(asUserWithExtra("bob@example.com", oidcExtra(iss, sub, unix)), base, nw); !errors.Is(err, ErrNotPrincipal) {
		t.Fatalf("bob with alice's extras: %v, want ErrNotPrincipal", err)
	}
}

// FuzzResolutionVia: whatever issuer, subject and auth time a client writes into via and
// whatever extra the request carries, admission never panics and admits via only when each set
// field equals the request's one value of its extra key.
func FuzzResolutionVia(f *testing.F) {
	f.Add("https://idp.example.com", "sub", int64(1700000000), true, "https://idp.example.com", "sub", "1700000000", true)
	f.Add("https://idp.example.com", "sub", int64(1700000000), true, "https://idp.example.com", "sub", "1700000001", true)
	f.Add("a", "", int64(0), false, "b", "", "", false)
	f.Add("", "x", int64(-1), true, "", "x", "-1", true)
	f.Add("", "", int64(5), true, "", "", "05", true)
	base := sampleMoment(f)
	base.Spec.ExpiresAt = metav1.NewTime(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	v := momentValidator(f, time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC))
	f.Fuzz(func(t *testing.T, iss, sub string, authTime int64, hasAuthTime bool, xIss, xSub, xAuth string, hasXAuth bool) {
		via := &v1alpha1.ResolutionVia{Surface: "approval-service", Issuer: iss, Subject: sub}
		if hasAuthTime {
			at := metav1.NewTime(time.Unix(authTime, 0))
			via.AuthTime = &at
		}
		extra := map[string]authenticationv1.ExtraValue{}
		if xIss != "" {
			extra[ExtraOIDCIssuer] = authenticationv1.ExtraValue{xIss}
		}
		if xSub != "" {
			extra[ExtraOIDCSubject] = authenticationv1.ExtraValue{xSub}
		}
		if hasXAuth {
			extra[ExtraAuthTime] = authenticationv1.ExtraValue{xAuth}
		}
		nw := base.DeepCopy()
		nw.Spec.Resolution = &v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionDeclined, EnvelopeDigest: base.Spec.EnvelopeDigest, Via: via}
		_, err := v.ValidateUpdate(asUserWithExtra("alice@example.com", extra), base, nw)
		if err != nil {
			if !errors.Is(err, ErrUnverifiedVia) {
				t.Fatalf("refused for another reason: %v", err)
			}
			return
		}
		switch {
		case iss != "" && iss != xIss:
			t.Fatalf("admitted issuer %q with extra %q", iss, xIss)
		case sub != "" && sub != xSub:
			t.Fatalf("admitted subject %q with extra %q", sub, xSub)
		case hasAuthTime && (!hasXAuth || xAuth != strconv.FormatInt(authTime, 10)):
			t.Fatalf("admitted authTime %d with extra %q (present %v)", authTime, xAuth, hasXAuth)
		}
	})
}

// FuzzResolution: whatever a principal writes into spec.resolution, admission never panics
// and never admits a resolution that names another envelope, an option the envelope lacks, or
// a kind outside §7.3.
func FuzzResolution(f *testing.F) {
	for _, s := range []struct {
		kind   string
		idx    int32
		hasIdx bool
		answer string
		digest string
	}{
		{"option", 1, true, "", ""}, {"option", 7, true, "", ""}, {"option", -1, true, "", ""},
		{"answer", 0, false, "yes", ""}, {"answer", 0, false, "\x00", ""}, {"declined", 0, true, "", ""},
		{"question", 0, false, "x", ""}, {"Option", 0, true, "", ""}, {"option", 0, true, "", "sha256:00"},
	} {
		f.Add(s.kind, s.idx, s.hasIdx, s.answer, s.digest)
	}
	base := sampleMoment(f)
	base.Spec.ExpiresAt = metav1.NewTime(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	v := momentValidator(f, time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC))
	f.Fuzz(func(t *testing.T, kind string, idx int32, hasIdx bool, answer, digest string) {
		if digest == "" {
			digest = string(base.Spec.EnvelopeDigest)
		}
		r := &v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionKind(kind), Answer: answer, EnvelopeDigest: v1alpha1.Digest(digest)}
		if hasIdx {
			r.OptionIdx = ptr.To(idx)
		}
		nw := base.DeepCopy()
		nw.Spec.Resolution = r
		_, err := v.ValidateUpdate(asUser("alice@example.com", ""), base, nw)
		if err != nil {
			return
		}
		switch {
		case digest != string(base.Spec.EnvelopeDigest):
			t.Fatalf("admitted a resolution naming %q", digest)
		case kind != "option" && kind != "answer" && kind != "question" && kind != "declined":
			t.Fatalf("admitted kind %q", kind)
		case kind == "option" && (!hasIdx || idx < 0 || idx > 1):
			t.Fatalf("admitted option %d (hasIdx %v) of a 2-option envelope", idx, hasIdx)
		case kind != "option" && hasIdx:
			t.Fatalf("admitted option_idx with kind %q", kind)
		case kind == "answer" && answer == "":
			t.Fatalf("admitted an empty answer")
		}
	})
}
