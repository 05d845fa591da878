package idp_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/actgate/actgate/test/envtest"
	"github.com/actgate/actgate/test/testutil/idp"
)

// review asks the API server who the bearer of token is (SelfSubjectReview).
func review(ctx context.Context, env *envtest.Env, token string) (authenticationv1.UserInfo, error) {
	cfg := &rest.Config{Host: env.Config.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: env.Config.CAData}}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return authenticationv1.UserInfo{}, err
	}
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return authenticationv1.UserInfo{}, err
	}
	return r.Status.UserInfo, nil
}

// TestAPIServerTrustsProvider starts the kube-apiserver with the provider's
// AuthenticationConfig and calls it with ID tokens from SignIn: the request's user is
// 'oidc:'+email with the issuer, subject and auth_time in userInfo.extra; a token for another
// audience or with a broken signature is refused (401).
func TestAPIServerTrustsProvider(t *testing.T) {
	envtest.SkipIfShort(t)
	p, rps := startRPs(t, clientID, "another-client")
	approval, other := rps[0], rps[1]
	path := p.WriteAuthenticationConfig(t, t.TempDir(), clientID)
	env := envtest.Start(t, envtest.WithoutCRDs(), envtest.WithAPIServerFlag("authentication-config", path))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	aliceTok, alice, aliceRaw := signIn(t, p, approval, p.HTTPClient(), idp.Alice)
	// The API server fetches the provider's discovery document and keys after it starts; until
	// then it answers 401.
	var ui authenticationv1.UserInfo
	var err error
	for {
		if ui, err = review(ctx, env, aliceRaw); err == nil || !apierrors.IsUnauthorized(err) || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("alice's ID token: %v", err)
	}
	if ui.Username != "oidc:alice@example.com" {
		t.Fatalf("username %q", ui.Username)
	}
	if !slices.Contains(ui.Groups, "oidc:finance") || !slices.Contains(ui.Groups, "system:authenticated") {
		t.Fatalf("groups %v", ui.Groups)
	}
	want := map[string]string{
		idp.ExtraIssuer:   p.Issuer(),
		idp.ExtraSubject:  aliceTok.Subject,
		idp.ExtraAuthTime: strconv.FormatInt(alice.AuthTime, 10),
	}
	for k, v := range want {
		if got := ui.Extra[k]; len(got) != 1 || got[0] != v {
			t.Errorf("extra %s = %v, want [%s]", k, got, v)
		}
	}
	if alice.AuthTime == 0 || aliceTok.Subject == "" {
		t.Fatalf("token lacks auth_time or sub: %+v", alice)
	}

	_, _, bobRaw := signIn(t, p, approval, p.HTTPClient(), idp.Bob)
	if ui, err := review(ctx, env, bobRaw); err != nil || ui.Username != "oidc:bob@example.com" {
		t.Fatalf("bob's token: %q, %v", ui.Username, err)
	}

	// A token the same provider issued to another client (audience) is not accepted.
	_, otherClaims, otherRaw := signIn(t, p, other, p.HTTPClient(), idp.Alice)
	if otherClaims.Email != "alice@example.com" {
		t.Fatalf("other client's token names %q", otherClaims.Email)
	}
	if _, err := review(ctx, env, otherRaw); !apierrors.IsUnauthorized(err) {
		t.Fatalf("a token for another audience: %v, want 401", err)
	}
	// A token whose signature is broken is not accepted.
	broken := aliceRaw[:len(aliceRaw)-4] + "AAAA"
	if broken == aliceRaw {
		broken = aliceRaw[:len(aliceRaw)-4] + "BBBB"
	}
	var se *apierrors.StatusError
	if _, err := review(ctx, env, broken); !errors.As(err, &se) || se.Status().Code != http.StatusUnauthorized {
		t.Fatalf("a token with a broken signature: %v, want 401", err)
	}
}
