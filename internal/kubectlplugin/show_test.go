package kubectlplugin

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1alpha1 "github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/envelope"
)

// showInput loads testdata/show/<name>.yaml: its one BindingMoment and, when the file has it,
// the act; without one the act read fails the way RBAC refuses it.
func showInput(t *testing.T, path string) ShowInput {
	t.Helper()
	objs := loadObjects(t, path)
	if len(objs.moments) != 1 {
		t.Fatalf("%s: want one BindingMoment, have %d", path, len(objs.moments))
	}
	bm := &objs.moments[0]
	in := ShowInput{Moment: OpenMoment(bm), Now: testNow}
	for i := range objs.acts {
		if objs.acts[i].Name == bm.Spec.ActRef.Name {
			in.Act = &objs.acts[i]
		}
	}
	if in.Act == nil {
		in.ActErr = fmt.Errorf("%s", apiMessage(apierrors.NewForbidden(
			schema.GroupResource{Group: v1alpha1.GroupName, Resource: "acts"}, bm.Spec.ActRef.Name,
			fmt.Errorf(`User "alice@example.com" cannot get resource "acts" in API group "actgate.io" in the namespace "payments"`))))
	}
	return in
}

func TestShowGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/show/*.yaml")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no show inputs: %v", err)
	}
	g := newGoldenSet("show")
	for _, path := range inputs {
		name := strings.TrimSuffix(filepath.Base(path), ".yaml")
		t.Run(name, func(t *testing.T) {
			in := showInput(t, path)
			got := render(t, func(b *bytes.Buffer) error { return Show(b, in) })
			noTerminalControl(t, got)
			g.check(t, name, got)
		})
	}
	g.orphans(t)
}

// TestShowInvariants checks envelope-04 §9.1 on every well-formed input, independently of the
// golden bytes: the four briefing slots, the recommended option marked, each option's reasoning
// beside it, an affordance (a key and its command) for each hatch that is true and none for a
// closed one, a decline affordance; plus the act's tool, server, class and action digest.
func TestShowInvariants(t *testing.T) {
	inputs, _ := filepath.Glob("testdata/show/*.yaml")
	checked := 0
	for _, path := range inputs {
		in := showInput(t, path)
		if !in.Moment.Well() {
			continue
		}
		checked++
		t.Run(filepath.Base(path), func(t *testing.T) {
			out := render(t, func(b *bytes.Buffer) error { return Show(b, in) })
			c := in.Moment.Envelope.Content()
			mustContainInOrder(t, out, slotsInOrder(c)...)
			if n := strings.Count(out, "(recommended)"); n != 1 {
				t.Errorf("%d options marked recommended, want exactly 1", n)
			}
			pending := StatusAt(in.Moment.Object, testNow) == StatusPending
			h := c.Question.Hatches
			for _, hatch := range []struct {
				open       bool
				key, flag  string
				renderLine string
			}{
				{h.FreeText, "[a]", "--answer TEXT", "[a] Answer in your own words"},
				{h.Dialogue, "[q]", "--question", "[q] Reject the question"},
				{true, "[d]", "--decline", "[d] Decline"},
			} {
				if got := strings.Contains(out, hatch.renderLine); got != hatch.open {
					t.Errorf("affordance %q rendered = %v, hatch open = %v", hatch.renderLine, got, hatch.open)
				}
				if pending {
					if got := strings.Contains(out, hatch.flag); got != hatch.open {
						t.Errorf("command %q shown = %v, hatch open = %v", hatch.flag, got, hatch.open)
					}
				}
			}
			if pending != strings.Contains(out, "kubectl actgate resolve ") {
				t.Errorf("resolve commands shown = %v, moment pending = %v", !pending, pending)
			}
			if a := in.Act; a != nil {
				mustContainInOrder(t, out, "Tool:      "+a.Spec.Tool, "Server:    "+a.Spec.Server,
					"Class:     "+string(a.Spec.ConsequenceClass), "Action:    "+string(a.Spec.ActionDigest))
			}
		})
	}
	if checked < 4 {
		t.Fatalf("only %d well-formed inputs checked", checked)
	}
}

// TestShowDiscardedEnvelope: a discarded envelope is never presented as a decision, only with a
// diagnostic line per problem (§9.3, §12.8), and offers no way to resolve it.
func TestShowDiscardedEnvelope(t *testing.T) {
	for _, tc := range []struct {
		file    string
		code    envelope.Code
		heading string
	}{
		// A line break in the synopsis is well formed (envelope-04) but outside the actgate
		// profile: not shown, and not called malformed.
		{"malformed", envelope.CodeStringControl, "BINDING MOMENT NOT SHOWN: the envelope is well formed but outside the actgate profile"},
		{"digest-mismatch", CodeEnvelopeDigestMismatch, "BINDING MOMENT DISCARDED: the envelope is malformed"},
		{"synopsis-mismatch", CodeSynopsisMismatch, "BINDING MOMENT DISCARDED: the envelope is malformed"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			in := showInput(t, filepath.Join("testdata", "show", tc.file+".yaml"))
			if in.Moment.Well() {
				t.Fatal("the envelope was accepted")
			}
			out := render(t, func(b *bytes.Buffer) error { return Show(b, in) })
			mustContainInOrder(t, out, tc.heading, string(tc.code))
			for _, forbidden := range []string{"[1] ", "(recommended)", "kubectl actgate resolve", "Question:", "Synopsis:"} {
				if strings.Contains(out, forbidden) {
					t.Errorf("a discarded envelope rendered %q:\n%s", forbidden, out)
				}
			}
			if err := Resolvable(in.Moment, "", testNow); err == nil {
				t.Error("a discarded envelope is resolvable")
			}
		})
	}
}

func TestShowResolvedStatesWhatWasChosen(t *testing.T) {
	in := showInput(t, "testdata/show/resolved.yaml")
	out := render(t, func(b *bytes.Buffer) error { return Show(b, in) })
	mustContainInOrder(t, out, "State:       Resolved", `Resolution:  option [2] "Dry-run the payment"`, "Resolved by: alice@example.com at 2026-11-29T14:59:10Z")
	if strings.Contains(out, "Via:") {
		t.Errorf("a resolution without resolvedVia shows a Via line:\n%s", out)
	}
	// The recorded surface and OpenID Connect authentication, terminal-safe.
	authTime := metav1.NewTime(time.Date(2026, 11, 29, 14, 55, 0, 0, time.UTC))
	in.Moment.Object.Status.ResolvedVia = &v1alpha1.ResolutionVia{Surface: "approval-service", Issuer: "https://idp.example.com",
		Subject: "alice\x1b[2J", AuthTime: &authTime}
	out = render(t, func(b *bytes.Buffer) error { return Show(b, in) })
	mustContainInOrder(t, out, "Resolved by: alice@example.com",
		"Via:         approval-service, signed in to https://idp.example.com as subject alice", "at 2026-11-29T14:55:00Z")
	noTerminalControl(t, out)
	in.Moment.Object.Status.ResolvedVia = &v1alpha1.ResolutionVia{Surface: "kubectl"}
	out = render(t, func(b *bytes.Buffer) error { return Show(b, in) })
	mustContainInOrder(t, out, "Resolved by: alice@example.com", "Via:         kubectl\n")
	// An answer's text is principal content: Describe never echoes it (envelope-04 §13).
	in.Moment.Object.Spec.Resolution = &v1alpha1.BindingMomentResolution{Kind: v1alpha1.ResolutionAnswer, Answer: "secret words", EnvelopeDigest: in.Moment.Object.Spec.EnvelopeDigest}
	out = render(t, func(b *bytes.Buffer) error { return Show(b, in) })
	if strings.Contains(out, "secret words") {
		t.Errorf("show echoed the answer text:\n%s", out)
	}
}
