package leasestore

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/actgate/actgate/internal/authority"
)

var t0 = time.Date(2026, 7, 27, 12, 0, 0, 0, time.UTC)

func digestOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func testBinding() authority.Binding {
	return authority.Binding{
		ActID:           "act-0123456789abcdef0123456789abcdef-0123456789abcdef0123456789abcdef",
		ArgumentsDigest: digestOf("args"),
		ActionDigest:    digestOf("action"),
		Tool:            "send_payment",
		Destination:     "https://payments.example/mcp",
		SinkID:          "billing-agent-sink",
		PolicyEpoch:     "3",
		Namespace:       "agents",
	}
}

func testSigner(t testing.TB) *authority.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := authority.NewSigner(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func signed(t testing.TB, s *authority.Signer) authority.Authority {
	t.Helper()
	a, err := s.Sign(testBinding(), t0.Add(123*time.Millisecond), 90*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestLeaseRoundTrip(t *testing.T) {
	s := testSigner(t)
	a := signed(t, s)
	l := leaseFor(a)
	if l.Name != a.ID || l.Namespace != "agents" {
		t.Fatalf("lease %s/%s", l.Namespace, l.Name)
	}
	if errs := validation.IsDNS1123Subdomain(l.Name); len(errs) > 0 {
		t.Fatalf("lease name %q: %v", l.Name, errs)
	}
	for k, v := range l.Labels {
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Fatalf("label %s=%q: %v", k, v, errs)
		}
	}
	if l.Labels[LabelState] != StateIssued || *l.Spec.LeaseDurationSeconds != 90 || l.Spec.HolderIdentity != nil {
		t.Fatalf("issued lease: labels %v spec %+v", l.Labels, l.Spec)
	}
	rec, err := decode(l, s.Verifier())
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != authority.StateIssued || rec.Authority.ID != a.ID || rec.Authority.Binding != a.Binding ||
		!rec.Authority.IssuedAt.Equal(a.IssuedAt) || !rec.Authority.ExpiresAt.Equal(a.ExpiresAt) {
		t.Fatalf("decoded %+v, want %+v", rec.Authority, a)
	}

	c := markConsumed(l, "op-1", t0.Add(time.Second))
	if l.Spec.HolderIdentity != nil || l.Labels[LabelState] != StateIssued {
		t.Fatal("markConsumed changed the Lease it was given")
	}
	rec, err = decode(c, s.Verifier())
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != authority.StateConsumed || rec.ConsumedBy != "op-1" || !rec.ConsumedAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("consumed record %+v", rec)
	}
}

// TestDecodeTampered: whatever is changed on a stored Lease, the authority no longer verifies.
func TestDecodeTampered(t *testing.T) {
	s := testSigner(t)
	a := signed(t, s)
	other := testSigner(t)
	cases := []struct {
		name string
		mod  func(l *coordinationv1.Lease)
	}{
		{"destination swapped", func(l *coordinationv1.Lease) { l.Annotations[AnnotationDestination] = "https://evil.example/mcp" }},
		{"arguments digest", func(l *coordinationv1.Lease) { l.Annotations[AnnotationArgumentsDigest] = digestOf("other") }},
		{"action digest", func(l *coordinationv1.Lease) { l.Annotations[AnnotationActionDigest] = digestOf("other") }},
		{"tool", func(l *coordinationv1.Lease) { l.Annotations[AnnotationTool] = "refund" }},
		{"sink", func(l *coordinationv1.Lease) { l.Annotations[AnnotationSinkID] = "other-sink" }},
		{"epoch", func(l *coordinationv1.Lease) { l.Annotations[AnnotationPolicyEpoch] = "4" }},
		{"act", func(l *coordinationv1.Lease) { l.Annotations[AnnotationActID] = "act-other" }},
		{"expiry extended", func(l *coordinationv1.Lease) {
			l.Annotations[AnnotationExpiresAt] = formatTime(a.ExpiresAt.Add(time.Hour))
		}},
		{"issue moved", func(l *coordinationv1.Lease) {
			l.Annotations[AnnotationIssuedAt] = formatTime(a.IssuedAt.Add(-time.Second))
		}},
		{"expiry not canonical", func(l *coordinationv1.Lease) {
			l.Annotations[AnnotationExpiresAt] = a.ExpiresAt.UTC().Format("2006-01-02T15:04:05.000-07:00")
		}},
		{"expiry garbage", func(l *coordinationv1.Lease) { l.Annotations[AnnotationExpiresAt] = "tomorrow" }},
		{"signature flipped", func(l *coordinationv1.Lease) {
			sig := append([]byte(nil), a.Signature...)
			sig[0] ^= 1
			l.Annotations[AnnotationSignature] = base64.StdEncoding.EncodeToString(sig)
		}},
		{"signature not base64", func(l *coordinationv1.Lease) { l.Annotations[AnnotationSignature] = "%%%" }},
		{"signature missing", func(l *coordinationv1.Lease) { delete(l.Annotations, AnnotationSignature) }},
		{"key relabelled", func(l *coordinationv1.Lease) { l.Annotations[AnnotationKeyID] = other.KeyID() }},
		{"annotations gone", func(l *coordinationv1.Lease) { l.Annotations = nil }},
		{"copied to another namespace", func(l *coordinationv1.Lease) { l.Namespace = "team-b" }},
		{"renamed", func(l *coordinationv1.Lease) { l.Name = authority.IDPrefix + strings.Repeat("0", 64) }},
		{"re-signed by an untrusted key", func(l *coordinationv1.Lease) {
			b, err := other.Sign(testBinding(), a.IssuedAt, 90*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			*l = *leaseFor(b)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := leaseFor(a)
			tc.mod(l)
			_, err := decode(l, s.Verifier())
			if !errors.Is(err, authority.ErrBadSignature) {
				t.Fatalf("decode = %v, want ErrBadSignature", err)
			}
			if authority.CodeOf(err) != authority.CodeBadSignature {
				t.Fatalf("code %s", authority.CodeOf(err))
			}
		})
	}
}

// TestConsumedMarkers: any sign of consumption makes the Lease spent, even if the others were
// removed.
func TestConsumedMarkers(t *testing.T) {
	s := testSigner(t)
	a := signed(t, s)
	holder := "op-9"
	cases := map[string]func(*coordinationv1.Lease){
		"holder only":     func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = &holder },
		"label only":      func(l *coordinationv1.Lease) { l.Labels[LabelState] = StateConsumed },
		"annotation only": func(l *coordinationv1.Lease) { l.Annotations[AnnotationConsumedBy] = "op-9" },
	}
	for name, mod := range cases {
		t.Run(name, func(t *testing.T) {
			l := leaseFor(a)
			mod(l)
			rec, err := decode(l, s.Verifier())
			if err != nil {
				t.Fatal(err)
			}
			if rec.State != authority.StateConsumed {
				t.Fatalf("state %s, want CONSUMED", rec.State)
			}
		})
	}
	empty := ""
	l := leaseFor(a)
	l.Spec.HolderIdentity = &empty
	if rec, err := decode(l, s.Verifier()); err != nil || rec.State != authority.StateIssued {
		t.Fatalf("empty holder: %s, %v", rec.State, err)
	}
}

func TestActLabelValue(t *testing.T) {
	long := testBinding().ActID
	if len(long) <= 63 {
		t.Fatalf("test act ID %d chars; want one longer than a label value", len(long))
	}
	for _, id := range []string{"act-7f3a", long, strings.Repeat("x", 253), "has space", "-leading"} {
		v := ActLabelValue(id)
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Fatalf("ActLabelValue(%q) = %q: %v", id, v, errs)
		}
		if ActLabelValue(id) != v {
			t.Fatal("not deterministic")
		}
	}
	if ActLabelValue("act-7f3a") != "act-7f3a" {
		t.Fatal("a short ID is not used as is")
	}
	if a, b := ActLabelValue(long), ActLabelValue(long+"x"); a == b || !strings.HasPrefix(a, "sha256-") {
		t.Fatalf("long IDs: %q %q", a, b)
	}
}

func TestCollectable(t *testing.T) {
	s := testSigner(t)
	a := signed(t, s) // expires t0+90.123s
	retention := time.Hour
	consumedAt := func(at time.Time) func(*coordinationv1.Lease) {
		return func(l *coordinationv1.Lease) { *l = *markConsumed(l, "op", at) }
	}
	cases := []struct {
		name string
		mod  func(*coordinationv1.Lease)
		now  time.Time
		want bool
	}{
		{"issued, unexpired", nil, t0, false},
		{"expired within retention", nil, a.ExpiresAt.Add(retention), false},
		{"expired past retention", nil, a.ExpiresAt.Add(retention + time.Millisecond), true},
		{"consumed within retention", consumedAt(t0.Add(time.Second)), t0.Add(time.Second + retention), false},
		{"consumed past retention", consumedAt(t0.Add(time.Second)), t0.Add(time.Second + retention + time.Millisecond), true},
		{"consumed without a time", func(l *coordinationv1.Lease) { l.Labels[LabelState] = StateConsumed }, t0.Add(100 * retention), false},
		{"unreadable expiry", func(l *coordinationv1.Lease) { l.Annotations[AnnotationExpiresAt] = "x" }, t0.Add(100 * retention), false},
		{"not actgate's", func(l *coordinationv1.Lease) { delete(l.Labels, LabelManagedBy) }, t0.Add(100 * retention), false},
		{"another component", func(l *coordinationv1.Lease) { l.Labels[LabelComponent] = "leader-election" }, t0.Add(100 * retention), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := leaseFor(a)
			if tc.mod != nil {
				tc.mod(l)
			}
			if got := Collectable(l, tc.now, retention); got != tc.want {
				t.Fatalf("Collectable = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSelector(t *testing.T) {
	l := leaseFor(signed(t, testSigner(t)))
	if !Selector().Matches(labels.Set(l.Labels)) {
		t.Fatal("Selector does not select an authority Lease")
	}
	if Selector().Matches(labels.Set(map[string]string{LabelManagedBy: ManagedBy})) {
		t.Fatal("Selector selects a Lease of another component")
	}
}

// noLeases is a LeasesGetter for option checks; New never calls it.
type noLeases struct{}

func (noLeases) Leases(string) coordinationv1client.LeaseInterface { return nil }

func TestNewRefusesIncompleteOptions(t *testing.T) {
	v := testSigner(t).Verifier()
	for name, o := range map[string]Options{
		"no client":        {Verifier: v},
		"no verifier":      {Leases: noLeases{}},
		"negative timeout": {Leases: noLeases{}, Verifier: v, Timeout: -time.Second},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}

// FuzzDecode: a Lease read back from the API server is untrusted input. Whatever its
// annotations hold, decode never panics, and it accepts only the Lease of exactly the authority
// that was signed.
func FuzzDecode(f *testing.F) {
	s := testSigner(f)
	a := signed(f, s)
	good := leaseFor(a)
	keys := []string{
		AnnotationActID, AnnotationArgumentsDigest, AnnotationActionDigest, AnnotationTool,
		AnnotationDestination, AnnotationSinkID, AnnotationPolicyEpoch, AnnotationIssuedAt,
		AnnotationExpiresAt, AnnotationKeyID, AnnotationSignature,
	}
	for i, k := range keys {
		f.Add(uint8(i), good.Annotations[k], good.Name, good.Namespace)
	}
	f.Add(uint8(7), "2026-07-27T12:00:00.123+00:00", good.Name, good.Namespace)
	f.Add(uint8(10), "", good.Name, "")
	f.Add(uint8(0), "act-\x00", "authz-", "agents")
	f.Fuzz(func(t *testing.T, which uint8, value, name, namespace string) {
		l := good.DeepCopy()
		k := keys[int(which)%len(keys)]
		l.Annotations[k] = value
		l.Name, l.Namespace = name, namespace
		rec, err := decode(l, s.Verifier())
		if err != nil {
			if !errors.Is(err, authority.ErrBadSignature) {
				t.Fatalf("decode error %v does not wrap ErrBadSignature", err)
			}
			return
		}
		if rec.Authority.ID != a.ID || rec.Authority.Binding != a.Binding || !rec.Authority.ExpiresAt.Equal(a.ExpiresAt) || !rec.Authority.IssuedAt.Equal(a.IssuedAt) {
			t.Fatalf("a changed Lease decoded to another authority: %+v", rec.Authority)
		}
	})
}
