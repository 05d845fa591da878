package service

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/review"
)

// Extra keys of a bound service-account token's user info (k8s.io/apiserver's
// serviceaccount.PodNameKey and PodUIDKey).
const (
	extraPodName = "authentication.kubernetes.io/pod-name"
	extraPodUID  = "authentication.kubernetes.io/pod-uid"
)

const serviceAccountPrefix = "system:serviceaccount:"

// caller is an authenticated sidecar: its service account, pod and governing policy.
type caller struct {
	user           string // system:serviceaccount:<namespace>:<name>
	namespace      string
	serviceAccount string
	podName        string
	podUID         string // set with podName once the pod is found with the token's UID
	labels         map[string]string
	policy         *v1alpha1.ToolPolicy
}

// bearerToken returns the token of an "Authorization: Bearer" header.
func bearerToken(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// authenticate resolves a bearer token to a caller and its governing policy, or the refusal.
func (s *Service) authenticate(ctx context.Context, token string) (*caller, *outcome) {
	tr := &authenticationv1.TokenReview{}
	var err error
	tr.Status, _, err = s.tokens.Review(ctx, token, func(ctx context.Context) (authenticationv1.TokenReviewStatus, error) {
		created := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: s.audiences}}
		err := s.c.Create(ctx, created)
		return created.Status, err
	})
	if err != nil {
		o := apiFailure(ctx, "authenticate the caller", err)
		return nil, &o
	}
	unauthenticated := func(msg string) (*caller, *outcome) {
		o := deny(http.StatusUnauthorized, ef.EFPolicyDenied, review.ReasonUnauthenticated, msg)
		return nil, &o
	}
	if !tr.Status.Authenticated {
		s.log.V(1).Info("token not authenticated", "error", tr.Status.Error)
		return unauthenticated("The caller's token was not accepted.")
	}
	if !slices.ContainsFunc(tr.Status.Audiences, func(a string) bool { return slices.Contains(s.audiences, a) }) {
		return unauthenticated("The caller's token is not for this service's audience.")
	}
	ns, sa, ok := splitServiceAccount(tr.Status.User.Username)
	if !ok {
		return unauthenticated("Only a pod's service account may call the authority service.")
	}
	c := &caller{user: tr.Status.User.Username, namespace: ns, serviceAccount: sa}
	// Only a token bound to a pod (TokenRequest boundObjectRef, as the kubelet projects it)
	// names its caller: an unbound token for this audience, which anyone with
	// serviceaccounts/token create can mint, proves a service account and no pod.
	podNames := tr.Status.User.Extra[extraPodName]
	podUIDs := tr.Status.User.Extra[extraPodUID]
	if len(podNames) != 1 || len(podUIDs) != 1 || podNames[0] == "" || podUIDs[0] == "" {
		o := deny(http.StatusUnauthorized, ef.EFPolicyDenied, review.ReasonUnboundToken,
			"The caller's token is not bound to a pod: present the pod's projected service-account token (bound to its pod name and UID).")
		return nil, &o
	}
	return s.callerPod(ctx, c, podNames[0], podUIDs[0])
}

// splitServiceAccount parses system:serviceaccount:<namespace>:<name>.
func splitServiceAccount(user string) (ns, name string, ok bool) {
	rest, found := strings.CutPrefix(user, serviceAccountPrefix)
	if !found {
		return "", "", false
	}
	ns, name, found = strings.Cut(rest, ":")
	if !found || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return "", "", false
	}
	return ns, name, true
}

func podServiceAccount(p *corev1.Pod) string {
	if p.Spec.ServiceAccountName == "" {
		return "default"
	}
	return p.Spec.ServiceAccountName
}

// callerPod resolves the pod a bound token names, by name and UID: it must exist with the
// token's UID and run as the token's service account.
func (s *Service) callerPod(ctx context.Context, c *caller, name, uid string) (*caller, *outcome) {
	// Refusals that name the caller's namespace return the caller too: the policy endpoint
	// waits on that namespace's changes.
	notFound := func() (*caller, *outcome) {
		o := deny(http.StatusForbidden, ef.EFPolicyDenied, review.ReasonPodNotFound, "The caller's pod could not be identified.")
		return c, &o
	}
	pod, ok := s.cachedPod(ctx, c.namespace, name, uid)
	if !ok {
		pod = &corev1.Pod{}
		err := s.c.Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: name}, pod)
		switch {
		case apierrors.IsNotFound(err):
			return notFound()
		case apierrors.IsForbidden(err):
			// The service may read pods only where actgate governs (a ToolPolicy is there, and
			// the manager has bound the service's namespace role).
			o := deny(http.StatusForbidden, ef.EFPolicyDenied, review.ReasonNotGoverned,
				fmt.Sprintf("actgate does not govern namespace %s: no ToolPolicy there (or its access is not yet granted).", c.namespace))
			return c, &o
		case err != nil:
			o := apiFailure(ctx, "read the caller's pod", err)
			return nil, &o
		}
	}
	if string(pod.UID) != uid || podServiceAccount(pod) != c.serviceAccount {
		return notFound()
	}
	c.podName, c.podUID, c.labels = pod.Name, uid, pod.Labels
	return s.governing(ctx, c, []map[string]string{pod.Labels})
}

// cachedPod returns the caller's pod from the Cache when it holds it with the token's UID. A
// miss (no Cache, a pod too new for it, another UID under the name) is read from the API
// server by the caller, so the cache never refuses what the API server would accept.
func (s *Service) cachedPod(ctx context.Context, ns, name, uid string) (*corev1.Pod, bool) {
	if s.cache == nil {
		return nil, false
	}
	p, ok := s.cache.Pod(ctx, ns, name)
	if !ok || string(p.UID) != uid {
		return nil, false
	}
	return p, true
}

// listPolicies lists the ToolPolicies of ns: from the Cache once it has synced, else from the
// API server's watch cache.
func (s *Service) listPolicies(ctx context.Context, ns string) ([]v1alpha1.ToolPolicy, error) {
	if s.cache != nil && s.cache.Synced() {
		return s.cache.ListPolicies(ctx, ns)
	}
	var list v1alpha1.ToolPolicyList
	if err := s.c.List(ctx, &list, client.InNamespace(ns), fromWatchCache()); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// governing finds the one ToolPolicy that selects the caller's pods.
func (s *Service) governing(ctx context.Context, c *caller, labelSets []map[string]string) (*caller, *outcome) {
	items, err := s.listPolicies(ctx, c.namespace)
	if err != nil {
		o := apiFailure(ctx, "read the ToolPolicies", err)
		return nil, &o
	}
	var found []*v1alpha1.ToolPolicy
	for i := range items {
		p := &items[i]
		for _, ls := range labelSets {
			if selects(p, ls) {
				found = append(found, p)
				break
			}
		}
	}
	switch len(found) {
	case 0:
		o := deny(http.StatusForbidden, ef.EFPolicyDenied, review.ReasonNotGoverned, "No ToolPolicy governs the caller's pod.")
		return c, &o
	case 1:
		c.policy = found[0]
		return c, nil
	}
	names := make([]string, len(found))
	for i, p := range found {
		names[i] = p.Name
	}
	o := deny(http.StatusForbidden, ef.EFPolicyDenied, review.ReasonAmbiguousPolicy,
		fmt.Sprintf("More than one ToolPolicy governs the caller's pod (%s); none is applied.", strings.Join(names, ", ")))
	return c, &o
}

// fromWatchCache makes a list be served from the API server's watch cache (resourceVersion
// "0") instead of a consistent read, which waits for etcd's progress notification and costs
// tens of milliseconds a list on a quiet cluster. The cache lags etcd by milliseconds, as any
// informer does; it is used only to find policies, pods and binding moments. What single use
// rests on is read by quorum: the Lease (leasestore) and the escalated Act that records a grant.
func fromWatchCache() client.ListOption {
	return &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "0"}}
}

// selects reports whether p's podSelector selects labels. A selector that does not parse
// counts as selecting: the policy may be meant to govern the pod, so it takes part in the
// ambiguity check and, if it is the only one, is refused as not ready (fail closed).
func selects(p *v1alpha1.ToolPolicy, podLabels map[string]string) bool {
	sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
	if err != nil {
		return true
	}
	return sel.Matches(labels.Set(podLabels))
}
