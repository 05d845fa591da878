package approval

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	v1alpha1 "github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/console"
	"github.com/actgate/actgate/internal/kubectlplugin"
)

// Surface is how the service names itself in spec.resolution.via.surface.
const Surface = "approval-service"

func metav1Time(t time.Time) metav1.Time { return metav1.NewTime(t.UTC().Truncate(time.Second)) }

// SignIn is a verified sign-in: the ID token, its issuer, subject and auth_time (zero when
// absent), and all its claims.
type SignIn struct {
	IDToken, Issuer, Subject string
	AuthTime                 time.Time
	Claims                   map[string]any
}

// Backends makes the principal name and the backend of a verified sign-in. An error refuses
// the sign-in (its message is shown to the person).
type Backends interface {
	For(ctx context.Context, s SignIn) (principal string, b console.Backend, err error)
}

// kubeBackends is the approval service's Backends: the person's ID token as the bearer token
// to the kube-apiserver, which says who they are (SelfSubjectReview).
type kubeBackends struct {
	kube       *rest.Config
	namespaces []string
	now        func() time.Time
}

// For implements Backends.
func (k *kubeBackends) For(ctx context.Context, s SignIn) (string, console.Backend, error) {
	kc := rest.AnonymousClientConfig(k.kube)
	kc.BearerToken = s.IDToken
	kc.UserAgent = "actgate-approval"
	client, err := kubectlplugin.NewClient(kc)
	if err != nil {
		return "", nil, err
	}
	user, err := client.WhoAmI(ctx)
	if err != nil {
		return "", nil, fmt.Errorf("the API server does not accept the sign-in: %w", err)
	}
	via := &v1alpha1.ResolutionVia{Surface: Surface, Issuer: s.Issuer, Subject: s.Subject}
	if !s.AuthTime.IsZero() {
		t := metav1Time(s.AuthTime)
		via.AuthTime = &t
	}
	return user, &backend{client: client, namespaces: k.namespaces, principal: user, via: via, now: k.now}, nil
}

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
	if err != nil || ns == "" || !slices.Contains(b.namespaces, ns) {
		return console.Result{}, fmt.Errorf("%w: %s is not a binding moment of a namespace this service serves", console.ErrRefused, id)
	}
	return b.in(ns).Resolve(ctx, name, resolution)
}
