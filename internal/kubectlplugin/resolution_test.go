package kubectlplugin

import (
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/jcs"
)

func TestSpecResolution(t *testing.T) {
	env := envelopeOf(t, "pending") // two options
	closed := envelopeOf(t, "hatches-closed-no-act")
	d := env.Digest()
	for _, tc := range []struct {
		name string
		env  *envelope.Envelope
		in   envelope.Resolution
		want *v1alpha1.BindingMomentResolution
		code envelope.Code
	}{
		{"option", env, envelope.Resolution{EnvelopeDigest: d, Kind: envelope.KindOption, OptionIdx: 1},
			&v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionOption, OptionIdx: ptr.To[int32](1), EnvelopeDigest: v1alpha1.Digest(d)}, ""},
		{"option 0 keeps its index", env, envelope.Resolution{EnvelopeDigest: d, Kind: envelope.KindOption},
			&v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionOption, OptionIdx: ptr.To[int32](0), EnvelopeDigest: v1alpha1.Digest(d)}, ""},
		{"answer", env, envelope.Resolution{EnvelopeDigest: d, Kind: envelope.KindAnswer, Answer: "Wait for the audit.\nThen pay."},
			&v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionAnswer, Answer: "Wait for the audit.\nThen pay.", EnvelopeDigest: v1alpha1.Digest(d)}, ""},
		{"question carries nothing else", env, envelope.Resolution{EnvelopeDigest: d, Kind: envelope.KindQuestion, OptionIdx: 1, Answer: "ignored"},
			&v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionQuestion, EnvelopeDigest: v1alpha1.Digest(d)}, ""},
		{"declined carries nothing else", env, envelope.Resolution{EnvelopeDigest: d, Kind: envelope.KindDeclined},
			&v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionDeclined, EnvelopeDigest: v1alpha1.Digest(d)}, ""},
		{"option out of range", env, envelope.Resolution{EnvelopeDigest: d, Kind: envelope.KindOption, OptionIdx: 2}, nil, envelope.CodeResOptionIdx},
		{"negative option", env, envelope.Resolution{EnvelopeDigest: d, Kind: envelope.KindOption, OptionIdx: -1}, nil, envelope.CodeResOptionIdx},
		{"another envelope", closed, envelope.Resolution{EnvelopeDigest: d, Kind: envelope.KindDeclined}, nil, envelope.CodeResEnvelopeMismatch},
		{"empty answer", env, envelope.Resolution{EnvelopeDigest: d, Kind: envelope.KindAnswer, Answer: ""}, nil, envelope.CodeResAnswer},
		{"blank answer", env, envelope.Resolution{EnvelopeDigest: d, Kind: envelope.KindAnswer, Answer: " \t "}, nil, envelope.CodeResAnswer},
		{"answer with an escape", env, envelope.Resolution{EnvelopeDigest: d, Kind: envelope.KindAnswer, Answer: "ok\x1b[2J"}, nil, envelope.CodeResAnswer},
		{"answer too long", env, envelope.Resolution{EnvelopeDigest: d, Kind: envelope.KindAnswer, Answer: strings.Repeat("x", envelope.MaxAnswerRunes+1)}, nil, envelope.CodeResAnswer},
		{"unknown kind", env, envelope.Resolution{EnvelopeDigest: d, Kind: "approve"}, nil, envelope.CodeResKind},
		{"no digest", env, envelope.Resolution{Kind: envelope.KindDeclined}, nil, envelope.CodeResDigestForm},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SpecResolution(tc.env, tc.in)
			if tc.code != "" {
				if !errors.Is(err, ErrInvalidResolution) || !strings.Contains(err.Error(), string(tc.code)) {
					t.Fatalf("err = %v, want ErrInvalidResolution with %s", err, tc.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestResolvable(t *testing.T) {
	base := showInput(t, "testdata/show/pending.yaml").Moment.Object
	digest := string(base.Spec.EnvelopeDigest)
	with := func(f func(*v1alpha1.BindingMoment)) *Moment {
		bm := base.DeepCopy()
		f(bm)
		return OpenMoment(bm)
	}
	for _, tc := range []struct {
		name string
		m    *Moment
		pin  string
		want error
	}{
		{"pending", with(func(*v1alpha1.BindingMoment) {}), "", nil},
		{"pending, pinned to its envelope", with(func(*v1alpha1.BindingMoment) {}), digest, nil},
		{"pinned to another envelope", with(func(*v1alpha1.BindingMoment) {}), "sha256:" + strings.Repeat("0", 64), ErrEnvelopeChanged},
		{"already resolved", with(func(bm *v1alpha1.BindingMoment) {
			bm.Spec.Resolution = &v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionDeclined, EnvelopeDigest: bm.Spec.EnvelopeDigest}
		}), "", ErrAlreadyResolved},
		{"resolved by status", with(func(bm *v1alpha1.BindingMoment) { bm.Status.State = v1alpha1.BindingMomentResolved }), "", ErrAlreadyResolved},
		{"expired by the clock", with(func(bm *v1alpha1.BindingMoment) { bm.Spec.ExpiresAt = metav1.NewTime(testNow) }), "", ErrExpired},
		{"expired by status", with(func(bm *v1alpha1.BindingMoment) { bm.Status.State = v1alpha1.BindingMomentExpired }), "", ErrExpired},
		{"malformed envelope", with(func(bm *v1alpha1.BindingMoment) { bm.Spec.Envelope = `{"synopsis":"x"}` }), "", ErrMalformedEnvelope},
		{"digest mismatch", with(func(bm *v1alpha1.BindingMoment) {
			bm.Spec.EnvelopeDigest = v1alpha1.Digest("sha256:" + strings.Repeat("1", 64))
		}), "", ErrMalformedEnvelope},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Resolvable(tc.m, tc.pin, testNow)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestStatusAt(t *testing.T) {
	future := metav1.NewTime(testNow.Add(time.Minute))
	past := metav1.NewTime(testNow.Add(-time.Minute))
	res := &v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionQuestion}
	for _, tc := range []struct {
		name string
		bm   v1alpha1.BindingMoment
		want Status
	}{
		{"open", v1alpha1.BindingMoment{Spec: v1alpha1.BindingMomentSpec{ExpiresAt: future}}, StatusPending},
		{"controller says pending", v1alpha1.BindingMoment{Spec: v1alpha1.BindingMomentSpec{ExpiresAt: future}, Status: v1alpha1.BindingMomentStatus{State: v1alpha1.BindingMomentPending}}, StatusPending},
		{"expiry is exclusive", v1alpha1.BindingMoment{Spec: v1alpha1.BindingMomentSpec{ExpiresAt: metav1.NewTime(testNow)}}, StatusExpired},
		{"past expiry", v1alpha1.BindingMoment{Spec: v1alpha1.BindingMomentSpec{ExpiresAt: past}}, StatusExpired},
		{"no expiry is expired (fail closed)", v1alpha1.BindingMoment{}, StatusExpired},
		{"controller says expired", v1alpha1.BindingMoment{Spec: v1alpha1.BindingMomentSpec{ExpiresAt: future}, Status: v1alpha1.BindingMomentStatus{State: v1alpha1.BindingMomentExpired}}, StatusExpired},
		{"resolution written", v1alpha1.BindingMoment{Spec: v1alpha1.BindingMomentSpec{ExpiresAt: future, Resolution: res}}, StatusResolved},
		{"resolution written, then expiry passed", v1alpha1.BindingMoment{Spec: v1alpha1.BindingMomentSpec{ExpiresAt: past, Resolution: res}}, StatusResolved},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := StatusAt(&tc.bm, testNow); got != tc.want {
				t.Errorf("StatusAt = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestResolutionPatch: the write adds spec.resolution and nothing else, and carries the
// resourceVersion read so the API server applies it only to that version.
func TestResolutionPatch(t *testing.T) {
	d := v1alpha1.Digest("sha256:2796dd7ea64378483f1cd3d8e06bac1447279cf8cb7a785cd45d94e422fabb14")
	for _, tc := range []struct {
		name string
		res  *v1alpha1.BindingMomentResolution
		want string
	}{
		{"option", &v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionOption, OptionIdx: ptr.To[int32](0), EnvelopeDigest: d},
			`{"metadata":{"resourceVersion":"42"},"spec":{"resolution":{"kind":"option","optionIdx":0,"envelopeDigest":"` + string(d) + `"}}}`},
		{"answer", &v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionAnswer, Answer: "Later", EnvelopeDigest: d},
			`{"metadata":{"resourceVersion":"42"},"spec":{"resolution":{"kind":"answer","answer":"Later","envelopeDigest":"` + string(d) + `"}}}`},
		{"declined", &v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionDeclined, EnvelopeDigest: d},
			`{"metadata":{"resourceVersion":"42"},"spec":{"resolution":{"kind":"declined","envelopeDigest":"` + string(d) + `"}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolutionPatch("42", tc.res)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("patch\n %s\nwant\n %s", got, tc.want)
			}
		})
	}
	if _, err := resolutionPatch("", &v1alpha1.BindingMomentResolution{}); err == nil {
		t.Error("a patch without a resourceVersion was built: it would overwrite a concurrent resolution")
	}
}

func TestOpenMoment(t *testing.T) {
	base := showInput(t, "testdata/show/pending.yaml").Moment.Object
	for _, tc := range []struct {
		name  string
		edit  func(*v1alpha1.BindingMoment)
		codes []envelope.Code
	}{
		{"well formed", func(*v1alpha1.BindingMoment) {}, nil},
		{"not JSON", func(bm *v1alpha1.BindingMoment) { bm.Spec.Envelope = "{" }, []envelope.Code{envelope.Code(jcs.CodeSyntax)}},
		{"duplicate member", func(bm *v1alpha1.BindingMoment) {
			bm.Spec.Envelope = strings.Replace(bm.Spec.Envelope, `{"findings":`, `{"offer":"x","findings":`, 1)
		}, []envelope.Code{envelope.Code(jcs.CodeDuplicateMember)}},
		{"digest and synopsis both wrong", func(bm *v1alpha1.BindingMoment) {
			bm.Spec.EnvelopeDigest = v1alpha1.Digest("sha256:" + strings.Repeat("a", 64))
			bm.Spec.Synopsis = "Something else."
		}, []envelope.Code{CodeEnvelopeDigestMismatch, CodeSynopsisMismatch}},
		{"non-canonical bytes of the same envelope are that envelope", func(bm *v1alpha1.BindingMoment) {
			bm.Spec.Envelope = " " + bm.Spec.Envelope + "\n"
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bm := base.DeepCopy()
			tc.edit(bm)
			m := OpenMoment(bm)
			var codes []envelope.Code
			for _, p := range m.Problems {
				codes = append(codes, p.Code)
			}
			if len(codes) != len(tc.codes) {
				t.Fatalf("codes %v, want %v", codes, tc.codes)
			}
			for i := range codes {
				if codes[i] != tc.codes[i] {
					t.Fatalf("codes %v, want %v", codes, tc.codes)
				}
			}
			if m.Well() != (len(tc.codes) == 0) {
				t.Fatalf("Well() = %v with problems %v", m.Well(), codes)
			}
		})
	}
}

func TestSafe(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain", "plain"},
		{"a\x1b[31mred", "a\uFFFD[31mred"},
		{"line\nbreak\r", "line\uFFFDbreak\uFFFD"},
		{"bidi\u202egnp.exe", "bidi\uFFFDgnp.exe"},
		{"c1\u009b2J", "c1\uFFFD2J"},
		{"bad\xffutf8", "bad\uFFFDutf8"},
		{"Zahlung über 2 500 €", "Zahlung über 2 500 €"},
	} {
		if got := safe(tc.in); got != tc.want {
			t.Errorf("safe(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
