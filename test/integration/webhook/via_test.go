package webhook_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/test/envtest"
	"github.com/actgate/actgate/webhook"
)

// impersonator is a front door that may impersonate alice with the OpenID Connect extras, the
// way the API server's JWT authenticator would record them for her ID token. Impersonation
// sets userInfo.extra from Impersonate-Extra-* headers on the real API server, so the webhook
// sees exactly what it would see for a forwarded ID token.
func impersonator(t *testing.T, e *envtest.Env, principal string) *envtest.User {
	t.Helper()
	front, err := e.AddUser("via-test-front-door")
	if err != nil {
		t.Fatal(err)
	}
	extras := []string{webhook.ExtraOIDCIssuer, webhook.ExtraOIDCSubject, webhook.ExtraAuthTime}
	rules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"users"}, ResourceNames: []string{principal}, Verbs: []string{"impersonate"}}}
	for _, k := range extras {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"userextras/" + k}, Verbs: []string{"impersonate"}})
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{GenerateName: "via-impersonator-"}, Rules: rules}
	if err := e.Client.Create(ctxFor(t), role); err != nil {
		t.Fatal(err)
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "via-impersonator-"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: front.Name}},
	}
	if err := e.Client.Create(ctxFor(t), crb); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // t.Context() is done by now
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.Client.Delete(ctx, crb)
		_ = e.Client.Delete(ctx, role)
	})
	// RBAC is evaluated from the API server's informers: wait until every grant applies.
	checks := []authorizationv1.ResourceAttributes{{Verb: "impersonate", Resource: "users", Name: principal}}
	for _, k := range extras {
		checks = append(checks, authorizationv1.ResourceAttributes{Verb: "impersonate", Group: "authentication.k8s.io", Resource: "userextras", Subresource: k})
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, c := range checks {
		for {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: front.Name, ResourceAttributes: &c}}
			if err := e.Client.Create(ctxFor(t), sar); err != nil {
				t.Fatal(err)
			}
			if sar.Status.Allowed {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the front door was not granted %+v: %s", c, sar.Status.Reason)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return front
}

// as returns a client that authenticates as u and impersonates user with extra.
func as(t *testing.T, e *envtest.Env, u *envtest.User, user string, extra map[string][]string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(u.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Extra: extra}
	// The admin client's RESTMapper: discovery as a user refused impersonation would fail
	// before the request under test is sent.
	c, err := client.New(cfg, client.Options{Scheme: e.Scheme, Mapper: e.Client.RESTMapper()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func viaPatch(digest string, via map[string]any) string {
	b := fmt.Sprintf(`{"spec":{"resolution":{"kind":"declined","envelopeDigest":%q,"via":{`, digest)
	var parts []string
	for _, k := range []string{"surface", "issuer", "subject", "authTime"} {
		if v, ok := via[k]; ok {
			parts = append(parts, fmt.Sprintf("%q:%q", k, v))
		}
	}
	return b + strings.Join(parts, ",") + "}}}}"
}

// testResolutionVia: through the real API server, a resolution's via.issuer, subject and
// authTime are admitted only as the request's userInfo.extra says (what the JWT authenticator
// maps from the ID token), and a refused one stores nothing (docs/security.md "Resolution
// audit").
func testResolutionVia(t *testing.T, e *envtest.Env) {
	ns := namespace(t, e, "", nil)
	e.Kubectl(t, "apply", "-f", "config/rbac/bindingmoment_principal_role.yaml")
	const principal = "alice@example.com"
	const iss, sub = "https://idp.example.com", "alice-subject-0001"
	signedIn := time.Now().Add(-2 * time.Minute).Truncate(time.Second)
	authTime := signedIn.UTC().Format(time.RFC3339)
	extra := map[string][]string{
		webhook.ExtraOIDCIssuer: {iss}, webhook.ExtraOIDCSubject: {sub}, webhook.ExtraAuthTime: {strconv.FormatInt(signedIn.Unix(), 10)},
	}
	alice, err := e.AddUser(principal)
	if err != nil {
		t.Fatal(err)
	}
	bind(t, e, ns, principalRole, principal)
	front := impersonator(t, e, principal)
	asAlice := as(t, e, front, principal, extra)

	bm := momentFixture(t, e, ns, "pay-via", "system:serviceaccount:"+ns+":billing-agent", principal, time.Now().Add(time.Hour))
	digest := string(bm.Spec.EnvelopeDigest)
	patch := func(c client.Client, body string) error {
		return c.Patch(ctxFor(t), &v1alpha1.BindingMoment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: bm.Name}},
			client.RawPatch("application/merge-patch+json", []byte(body)))
	}
	stored := func() *v1alpha1.BindingMomentResolution {
		got := &v1alpha1.BindingMoment{}
		if err := e.Client.Get(ctxFor(t), client.ObjectKeyFromObject(bm), got); err != nil {
			t.Fatal(err)
		}
		return got.Spec.Resolution
	}
	full := map[string]any{"surface": "approval-service", "issuer": iss, "subject": sub, "authTime": authTime}
	with := func(k, v string) map[string]any {
		m := map[string]any{}
		for a, b := range full {
			m[a] = b
		}
		m[k] = v
		return m
	}

	for _, tc := range []struct {
		name   string
		c      client.Client
		via    map[string]any
		detail string
	}{
		{"a forged issuer", asAlice, with("issuer", "https://evil.example.com"), "via.issuer differs"},
		{"a forged subject", asAlice, with("subject", "someone-else"), "via.subject differs"},
		{"a forged, fresher authTime (a step-up not taken)", asAlice, with("authTime", time.Now().UTC().Format(time.RFC3339)), "via.authTime is"},
		{"OIDC claims from a request without them (alice's client certificate)", alice.Client, full, "carries no " + webhook.ExtraOIDCIssuer},
		{"OIDC claims from an impersonated request without extras", as(t, e, front, principal, nil), full, "carries no " + webhook.ExtraOIDCIssuer},
	} {
		t.Run(tc.name+" is refused and nothing is stored", func(t *testing.T) {
			err := patch(tc.c, viaPatch(digest, tc.via))
			if !apierrors.IsForbidden(err) || !contains(err.Error(), "admission webhook", "resolution.via must match", tc.detail) {
				t.Fatalf("patch = %v, want the webhook's denial mentioning %q", err, tc.detail)
			}
			if r := stored(); r != nil {
				t.Fatalf("a refused resolution was stored: %+v", r)
			}
		})
	}
	t.Run("the principal cannot send the extras herself (impersonation needs RBAC she lacks)", func(t *testing.T) {
		err := patch(as(t, e, alice, principal, extra), viaPatch(digest, full))
		if !apierrors.IsForbidden(err) || strings.Contains(err.Error(), "admission webhook") || !strings.Contains(err.Error(), "impersonate") {
			t.Fatalf("alice impersonating herself with extras = %v, want RBAC's refusal to impersonate", err)
		}
		if r := stored(); r != nil {
			t.Fatalf("stored: %+v", r)
		}
	})
	t.Run("matching extras are admitted and stored as written", func(t *testing.T) {
		if err := patch(asAlice, viaPatch(digest, full)); err != nil {
			t.Fatalf("patch with matching extras: %v", err)
		}
		r := stored()
		if r == nil || r.Kind != v1alpha1.ResolutionDeclined || r.Via == nil {
			t.Fatalf("stored resolution = %+v", r)
		}
		if v := r.Via; v.Surface != "approval-service" || v.Issuer != iss || v.Subject != sub || v.AuthTime == nil || !v.AuthTime.Time.Equal(signedIn) {
			t.Fatalf("stored via = %+v", v)
		}
	})
	t.Run("surface alone needs no extras", func(t *testing.T) {
		other := momentFixture(t, e, ns, "pay-via-kubectl", "system:serviceaccount:"+ns+":billing-agent", principal, time.Now().Add(time.Hour))
		err := alice.Client.Patch(ctxFor(t), other, client.RawPatch("application/merge-patch+json",
			[]byte(viaPatch(string(other.Spec.EnvelopeDigest), map[string]any{"surface": "kubectl"}))))
		if err != nil {
			t.Fatalf("surface-only resolution by alice's certificate: %v", err)
		}
	})
}
