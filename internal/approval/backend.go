package approval

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/console"
	"github.com/actgate/actgate/internal/kubectlplugin"
)

// Surface is how the service names itself in spec.resolution.via.surface.
const Surface = "approval-service"

func metav1Time(t time.Time) metav1.Time { return metav1.NewTime(t.UTC().Truncate(time.Second)) }

// backend is the console.Backend of one signed-in person: BindingMoments of the served
// namespaces addressed to them, read and written with their own ID token
// (kubectlplugin.ConsoleBackend per namespace). A moment's id is NAMESPACE/NAME.
type backend struct {
	client     *kubectlplugin.Client
	namespaces []string
	principal  string
	via        *v1alpha1.ResolutionVia
	now        func() time.Time
}

var _ console.Backend = (*backend)(nil)

func (b *backend) in(ns string) *kubectlplugin.ConsoleBackend {
	return &kubectlplugin.ConsoleBackend{Client: b.client, Namespace: ns, Principal: b.principal, Now: b.now, Via: b.via}
}

// List implements console.Backend. A namespace where RBAC lets the person read no
// BindingMoments holds none addressed to them that they could see, so it is passed over; when
// every namespace refuses, the page says so.
func (b *backend) List(ctx context.Context) ([]console.Moment, error) {
	var out []console.Moment
	var refused []string
	for _, ns := range b.namespaces {
		ms, err := b.in(ns).List(ctx)
		if apierrors.IsForbidden(err) {
			refused = append(refused, ns)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("namespace %s: %w", ns, err)
		}
		for _, m := range ms {
			m.ID = ns + "/" + m.ID
			m.Ref = m.ID
			out = append(out, m)
		}
	}
	if len(refused) == len(b.namespaces) {
		return nil, fmt.Errorf("%s may read binding moments in none of the namespaces this service serves (%s): ask for the principal role there",
			b.principal, strings.Join(refused, ", "))
	}
	return out, nil
}

// Resolve implements console.Backend for id NAMESPACE/NAME of a served namespace.
func (b *backend) Resolve(ctx context.Context, id string, resolution []byte) (console.Result, error) {
	ns, name, err := parseMomentRef(id)
	if err != nil || !slices.Contains(b.namespaces, ns) {
		return console.Result{}, fmt.Errorf("%w: %s is not a binding moment of a namespace this service serves", console.ErrRefused, id)
	}
	return b.in(ns).Resolve(ctx, name, resolution)
}
