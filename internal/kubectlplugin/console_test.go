package kubectlplugin

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1alpha1 "github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/console"
)

// fakeClient is a Client over controller-runtime's fake client holding objs: for the pure
// mapping of ConsoleBackend.List only (what is listed and how), never for write semantics,
// which test/integration/console checks against a real API server and the webhook.
func fakeClient(t *testing.T, funcs *interceptor.Funcs, objs objects) *Client {
	t.Helper()
	s := runtime.NewScheme()
	if err := authenticationv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	b := fake.NewClientBuilder().WithScheme(s)
	for i := range objs.acts {
		b = b.WithObjects(&objs.acts[i])
	}
	for i := range objs.moments {
		b = b.WithObjects(&objs.moments[i])
	}
	if funcs != nil {
		b = b.WithInterceptorFuncs(*funcs)
	}
	return &Client{c: b.Build()}
}

// TestConsoleBackendList: the console lists exactly the moments pending for the principal
// (or, with Everyone, for anyone), each with its Act's facts; a missing or unreadable Act is
// said so; a discarded envelope carries its problems and the object's synopsis as the
// conventional payload (envelope-04 §9.3).
func TestConsoleBackendList(t *testing.T) {
	ledger := loadObjects(t, "testdata/tables/ledger.yaml")
	malformed := loadObjects(t, "testdata/show/malformed.yaml")
	forbidden := &interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, opts ...client.ListOption) error {
		if _, ok := l.(*v1alpha1.ActList); ok {
			return apierrors.NewForbidden(schema.GroupResource{Group: v1alpha1.GroupName, Resource: "acts"}, "", errors.New(`User "alice@example.com" cannot list resource "acts"`))
		}
		return c.List(ctx, l, opts...)
	}}
	for _, tc := range []struct {
		name     string
		objs     objects
		funcs    *interceptor.Funcs
		everyone bool
		want     []string
		check    func(t *testing.T, ms map[string]console.Moment)
	}{
		{name: "alice", objs: ledger, want: []string{"send-payment-inv-2291-alice", "share-dates-alice"},
			check: func(t *testing.T, ms map[string]console.Moment) {
				m := ms["send-payment-inv-2291-alice"]
				if m.Envelope == nil || m.Act.Tool != "send_payment" || m.Act.Server != "payments" || m.Act.Class != "FINANCIAL" ||
					m.Act.ActionDigest == "" || m.Act.Unavailable != "" || m.Agent == "" || m.Principal != "alice@example.com" ||
					m.Ref != "payments/send-payment-inv-2291-alice" {
					t.Errorf("send-payment moment %+v", m)
				}
				if got := ms["share-dates-alice"].Act; got.Unavailable == "" || got.Tool != "" {
					t.Errorf("a moment whose Act is missing shows %+v", got)
				}
			}},
		{name: "everyone", objs: ledger, everyone: true, want: []string{"send-payment-inv-2291-alice", "send-payment-inv-2291-bob", "share-dates-alice"}},
		{name: "acts forbidden", objs: ledger, funcs: forbidden, want: []string{"send-payment-inv-2291-alice", "share-dates-alice"},
			check: func(t *testing.T, ms map[string]console.Moment) {
				if got := ms["send-payment-inv-2291-alice"].Act; got.Unavailable == "" || got.Tool != "" || got.Name != "send-payment-inv-2291" {
					t.Errorf("unreadable acts show %+v", got)
				}
			}},
		{name: "malformed", objs: malformed, want: []string{"share-dates-alice"},
			check: func(t *testing.T, ms map[string]console.Moment) {
				m := ms["share-dates-alice"]
				if m.Envelope != nil || len(m.Problems) == 0 || m.Payload != "Maybe share the dates?" {
					t.Errorf("malformed moment %+v", m)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &ConsoleBackend{Client: fakeClient(t, tc.funcs, tc.objs), Namespace: "payments", Principal: "alice@example.com",
				Everyone: tc.everyone, Now: func() time.Time { return testNow }}
			ms, err := b.List(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			byID := map[string]console.Moment{}
			var ids []string
			for _, m := range ms {
				byID[m.ID] = m
				ids = append(ids, m.ID)
			}
			slices.Sort(ids)
			if !slices.Equal(ids, tc.want) {
				t.Fatalf("listed %v, want %v", ids, tc.want)
			}
			if tc.check != nil {
				tc.check(t, byID)
			}
		})
	}
}

// TestConsoleBackendResolveBareResolution: a resolution the console passes on is the
// envelope-04 §7.3 object {"binding_moment_resolution": {...}}; the inner object alone, or
// with another member beside the wrapper, is refused before anything is written.
func TestConsoleBackendResolveBareResolution(t *testing.T) {
	ledger := loadObjects(t, "testdata/tables/ledger.yaml")
	var writes int
	funcs := &interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.UpdateOption) error {
			writes++
			return c.Update(ctx, o, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, o client.Object, p client.Patch, opts ...client.PatchOption) error {
			writes++
			return c.Patch(ctx, o, p, opts...)
		},
	}
	b := &ConsoleBackend{Client: fakeClient(t, funcs, ledger), Namespace: "payments", Principal: "alice@example.com",
		Now: func() time.Time { return testNow }}
	const id = "send-payment-inv-2291-alice"
	var digest string
	for _, m := range ledger.moments {
		if m.Name == id {
			digest = string(m.Spec.EnvelopeDigest)
		}
	}
	if digest == "" {
		t.Fatalf("no moment %s in the ledger", id)
	}
	inner := `{"envelope_digest":"` + digest + `","resolution":"option","option_idx":0}`
	for name, raw := range map[string]string{
		"bare inner object":       inner,
		"inner members alongside": `{"binding_moment_resolution":` + inner + `,"resolution":"option"}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := b.Resolve(t.Context(), id, []byte(raw))
			if !errors.Is(err, console.ErrRefused) || !errors.Is(err, ErrInvalidResolution) {
				t.Fatalf("Resolve = %v, want a refusal as an invalid resolution", err)
			}
			if writes != 0 {
				t.Fatalf("a refused resolution made %d writes", writes)
			}
		})
	}
}
