package v1alpha1_test

import (
	"fmt"
	"testing"

	v1alpha1 "github.com/actgate/actgate/api/v1alpha1"
)

// TestToolServerAuthValidation: the API server's CEL rules on spec.servers[].auth (the
// identity-provider settings of the sidecar; docs/identity.md "Gate → upstream").
func TestToolServerAuthValidation(t *testing.T) {
	e := apiServer(t)
	ns := e.Namespace(t)
	secret := &v1alpha1.SecretKeyRef{Name: "idp-client", Key: "secret"}
	cc := func() *v1alpha1.UpstreamAuth {
		return &v1alpha1.UpstreamAuth{Grant: v1alpha1.UpstreamGrantClientCredentials, TokenURL: "https://idp.example/token", ClientID: "sidecar", ClientSecretRef: secret}
	}
	for i, tc := range []struct {
		name string
		auth func() *v1alpha1.UpstreamAuth
		keep bool   // keep the sample's credentialsSecretRef
		want string // "" = accepted
	}{
		{"client credentials with a secret", cc, false, ""},
		{"client credentials with a key", func() *v1alpha1.UpstreamAuth {
			a := cc()
			a.ClientSecretRef, a.PrivateKeySecretRef = nil, secret
			return a
		}, false, ""},
		{"token exchange", func() *v1alpha1.UpstreamAuth {
			return &v1alpha1.UpstreamAuth{Grant: v1alpha1.UpstreamGrantTokenExchange, TokenURL: "https://idp.example/token", ServiceAccountTokenAudience: "https://idp.example"}
		}, false, ""},
		{"auth and a static credential", cc, true, "set either credentialsSecretRef or auth, not both"},
		{"client credentials without client authentication", func() *v1alpha1.UpstreamAuth {
			a := cc()
			a.ClientSecretRef = nil
			return a
		}, false, "ClientCredentials needs clientID and exactly one of clientSecretRef and privateKeySecretRef"},
		{"a secret and a key", func() *v1alpha1.UpstreamAuth {
			a := cc()
			a.PrivateKeySecretRef = secret
			return a
		}, false, "set at most one of clientSecretRef and privateKeySecretRef"},
		{"token exchange without an audience", func() *v1alpha1.UpstreamAuth {
			return &v1alpha1.UpstreamAuth{Grant: v1alpha1.UpstreamGrantTokenExchange, TokenURL: "https://idp.example/token"}
		}, false, "TokenExchange of the service account's token needs serviceAccountTokenAudience"},
		{"token exchange of the agent's token", func() *v1alpha1.UpstreamAuth {
			return &v1alpha1.UpstreamAuth{Grant: v1alpha1.UpstreamGrantTokenExchange, TokenURL: "https://idp.example/token", Subject: v1alpha1.UpstreamSubjectAgent}
		}, false, ""},
		{"subject Agent with client credentials", func() *v1alpha1.UpstreamAuth {
			a := cc()
			a.Subject = v1alpha1.UpstreamSubjectAgent
			return a
		}, false, "subject Agent is for grant TokenExchange"},
		{"http token endpoint", func() *v1alpha1.UpstreamAuth {
			a := cc()
			a.TokenURL = "http://idp.example/token"
			return a
		}, false, "tokenURL must be an absolute https URL"},
		{"unknown grant", func() *v1alpha1.UpstreamAuth {
			a := cc()
			a.Grant = "Password"
			return a
		}, false, `Unsupported value: "Password"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := samplePolicy(t)
			p.Namespace, p.Name = ns, fmt.Sprintf("auth-%d", i)
			if !tc.keep {
				p.Spec.Servers[0].CredentialsSecretRef = nil
			}
			p.Spec.Servers[0].Auth = tc.auth()
			p.Spec.AgentAuth = &v1alpha1.AgentAuth{Issuer: "https://idp.example", Audience: "api://actgate-agents"}
			wantInvalid(t, e.Client.Create(ctxFor(t), p), tc.want)
		})
	}
	// Only a verified agent token can be exchanged: subject Agent needs spec.agentAuth.
	p := samplePolicy(t)
	p.Namespace, p.Name = ns, "auth-agent-without-agentauth"
	p.Spec.Servers[0].CredentialsSecretRef = nil
	p.Spec.Servers[0].Auth = &v1alpha1.UpstreamAuth{Grant: v1alpha1.UpstreamGrantTokenExchange, TokenURL: "https://idp.example/token",
		Subject: v1alpha1.UpstreamSubjectAgent}
	p.Spec.AgentAuth = nil
	wantInvalid(t, e.Client.Create(ctxFor(t), p), "a server whose auth.subject is Agent needs spec.agentAuth")
}
