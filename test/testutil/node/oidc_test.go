package node_test

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/actgate/actgate/test/envtest"
	"github.com/actgate/actgate/test/testutil/idp"
	"github.com/actgate/actgate/test/testutil/node"
)

// TestAPIServerAcceptsProviderTokens: the node's kube-apiserver, started with
// Options.AuthenticationConfig for a provider listening on HostIP, answers a SelfSubjectReview
// for alice's ID token with oidc:alice@example.com and the provider as issuer.
func TestAPIServerAcceptsProviderTokens(t *testing.T) {
	envtest.SkipIfShort(t)
	ip, err := node.HostIP()
	if err != nil {
		t.Fatal(err)
	}
	const clientID, redirect = "actgate-approval", "http://127.0.0.1:9/callback"
	p := idp.Start(t, idp.Options{Addr: net.JoinHostPort(ip, "0"), Clients: []idp.Client{{ID: clientID, Secret: "s3cret", RedirectURIs: []string{redirect}}}})
	dir := t.TempDir()
	n, err := node.Up(t.Context(), node.Options{Dir: dir, Log: tlog{t}, AuthenticationConfig: p.WriteAuthenticationConfig(t, dir, clientID)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Down(); err != nil {
			t.Errorf("down: %v", err)
		}
	})

	// Sign in as alice; stop at the redirect URI and exchange the code with the PKCE verifier.
	conf := oauth2.Config{ClientID: clientID, ClientSecret: "s3cret", RedirectURL: redirect, Scopes: []string{"openid", "email"},
		Endpoint: oauth2.Endpoint{AuthURL: p.Issuer() + "/authorize", TokenURL: p.Issuer() + "/oauth/token"}}
	verifier := oauth2.GenerateVerifier()
	c := p.HTTPClient()
	c.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), redirect) {
			return http.ErrUseLastResponse
		}
		return nil
	}
	resp := p.SignIn(t, c, conf.AuthCodeURL("st", oauth2.S256ChallengeOption(verifier)), idp.Alice.Login, idp.Alice.Password)
	_ = resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || loc.Query().Get("code") == "" {
		t.Fatalf("no code: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	tok, err := conf.Exchange(context.WithValue(t.Context(), oauth2.HTTPClient, p.HTTPClient()), loc.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := tok.Extra("id_token").(string)

	cs, err := kubernetes.NewForConfig(&rest.Config{Host: n.APIServer, BearerToken: raw, TLSClientConfig: rest.TLSClientConfig{CAFile: n.CAFile}})
	if err != nil {
		t.Fatal(err)
	}
	var r *authenticationv1.SelfSubjectReview
	deadline := time.Now().Add(time.Minute) // the API server fetches the provider's keys after it starts
	for {
		r, err = cs.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("alice's ID token on the node's API server: %v", err)
	}
	if u := r.Status.UserInfo; u.Username != "oidc:alice@example.com" || len(u.Extra[idp.ExtraIssuer]) != 1 || u.Extra[idp.ExtraIssuer][0] != p.Issuer() {
		t.Fatalf("user %+v", u)
	}
}
