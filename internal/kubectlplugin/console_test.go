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
