package kubectlplugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/actgate/actgate/api/v1alpha1"
)

// FieldManager is the field manager the plugin's writes are recorded under.
const FieldManager = "kubectl-actgate"

// Client is the plugin's access to the API server, as the user the rest.Config authenticates.
// It reads acts and binding moments, asks who the user is, and writes two things: a binding
// moment's spec.resolution, and (tools accept, tools.go) a ToolPolicy's status.toolPins.
type Client struct {
	c client.Client
}

// NewClient returns a Client for cfg. The REST mapping of the three resources it touches is
// fixed (the CRDs and authentication.k8s.io/v1 name them), so no discovery round trip or
// discovery cache is needed.
func NewClient(cfg *rest.Config) (*Client, error) {
	s := runtime.NewScheme()
	if err := authenticationv1.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: s, Mapper: restMapper(), Log: logr.Discard()})
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return &Client{c: c}, nil
}

func restMapper() meta.RESTMapper {
	ag := v1alpha1.GroupVersion
	auth := authenticationv1.SchemeGroupVersion
	m := meta.NewDefaultRESTMapper([]schema.GroupVersion{ag, auth})
	add := func(gv schema.GroupVersion, kind, plural string, scope meta.RESTScope) {
		m.AddSpecific(gv.WithKind(kind), gv.WithResource(plural), gv.WithResource(kind), scope)
	}
	add(ag, "Act", "acts", meta.RESTScopeNamespace)
	add(ag, "BindingMoment", "bindingmoments", meta.RESTScopeNamespace)
	add(ag, "ToolPolicy", "toolpolicies", meta.RESTScopeNamespace)
	add(auth, "SelfSubjectReview", "selfsubjectreviews", meta.RESTScopeRoot)
	return m
}

// WhoAmI returns the user name the API server authenticates the caller as, from a
// SelfSubjectReview (what `kubectl auth whoami` does). Impersonation (--as) is honoured.
func (c *Client) WhoAmI(ctx context.Context) (string, error) {
	r := &authenticationv1.SelfSubjectReview{}
	if err := c.c.Create(ctx, r); err != nil {
		return "", fmt.Errorf("who am I (SelfSubjectReview): %w", err)
	}
	if r.Status.UserInfo.Username == "" {
		return "", errors.New("who am I (SelfSubjectReview): the API server returned no user name")
	}
	return r.Status.UserInfo.Username, nil
}

// ListActs lists the acts of namespace ns, or of every namespace when ns is "".
func (c *Client) ListActs(ctx context.Context, ns string) ([]v1alpha1.Act, error) {
	l := &v1alpha1.ActList{}
	if err := c.c.List(ctx, l, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("list acts: %w", err)
	}
	return l.Items, nil
}

// ListMoments lists the binding moments of namespace ns, or of every namespace when ns is "".
func (c *Client) ListMoments(ctx context.Context, ns string) ([]v1alpha1.BindingMoment, error) {
	l := &v1alpha1.BindingMomentList{}
	if err := c.c.List(ctx, l, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("list binding moments: %w", err)
	}
	return l.Items, nil
}

// GetMoment reads one binding moment.
func (c *Client) GetMoment(ctx context.Context, ns, name string) (*v1alpha1.BindingMoment, error) {
	bm := &v1alpha1.BindingMoment{}
	if err := c.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, bm); err != nil {
		return nil, fmt.Errorf("get binding moment %s/%s: %w", ns, name, err)
	}
	return bm, nil
}

// GetAct reads one act.
func (c *Client) GetAct(ctx context.Context, ns, name string) (*v1alpha1.Act, error) {
	a := &v1alpha1.Act{}
	if err := c.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, a); err != nil {
		return nil, fmt.Errorf("get act %s/%s: %w", ns, name, err)
	}
	return a, nil
}

// Resolve writes r as read's spec.resolution with resolutionPatch: only that field, guarded by
// the resourceVersion read, so a write racing another resolution (or any other change) fails
// with ErrConflict instead of overwriting it. A refusal by admission, RBAC or the schema wraps
// ErrRefusedByServer and keeps the server's message. It returns the object as stored, and
// fails if the stored resolution is not exactly r (a mutating hook must not change what the
// principal chose).
func (c *Client) Resolve(ctx context.Context, read *v1alpha1.BindingMoment, r *v1alpha1.BindingMomentResolution) (*v1alpha1.BindingMoment, error) {
	patch, err := resolutionPatch(read.ResourceVersion, r)
	if err != nil {
		return nil, err
	}
	out := read.DeepCopy()
	err = c.c.Patch(ctx, out, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldManager))
	switch {
	case err == nil:
	case apierrors.IsConflict(err):
		return nil, fmt.Errorf("%w (%s)", ErrConflict, apiMessage(err))
	case apierrors.IsForbidden(err), apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return nil, fmt.Errorf("%w: %s", ErrRefusedByServer, apiMessage(err))
	default:
		return nil, fmt.Errorf("write the resolution: %w", err)
	}
	if got := out.Spec.Resolution; !equality.Semantic.DeepEqual(got, r) {
		return out, fmt.Errorf("the API server stored a resolution other than the one written (%+v)", got)
	}
	return out, nil
}

// resolutionPatch is the JSON merge patch (RFC 7396) that adds spec.resolution and nothing
// else, carrying metadata.resourceVersion so the server applies it only to the version read.
func resolutionPatch(resourceVersion string, r *v1alpha1.BindingMomentResolution) ([]byte, error) {
	if resourceVersion == "" {
		return nil, errors.New("write the resolution: the object read carries no resourceVersion to guard the write with")
	}
	type objectMeta struct {
		ResourceVersion string `json:"resourceVersion"`
	}
	type spec struct {
		Resolution *v1alpha1.BindingMomentResolution `json:"resolution"`
	}
	return json.Marshal(struct {
		Metadata objectMeta `json:"metadata"`
		Spec     spec       `json:"spec"`
	}{objectMeta{resourceVersion}, spec{r}})
}

// apiMessage is the server's own message for an API error, terminal-safe.
func apiMessage(err error) string {
	var s apierrors.APIStatus
	if errors.As(err, &s) && s.Status().Message != "" {
		return safe(s.Status().Message)
	}
	return safe(err.Error())
}
