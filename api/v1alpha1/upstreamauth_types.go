package v1alpha1

// UpstreamGrant is how the sidecar obtains the upstream's token from the identity provider.
// +kubebuilder:validation:Enum=ClientCredentials;TokenExchange
type UpstreamGrant string

// The upstream grants.
const (
	// UpstreamGrantClientCredentials is RFC 6749 §4.4: the sidecar's own client at the provider,
	// authenticated by a client secret or a private-key JWT (RFC 7523 §2.2).
	UpstreamGrantClientCredentials UpstreamGrant = "ClientCredentials"
	// UpstreamGrantTokenExchange is RFC 8693: the pod's projected service-account token,
	// exchanged for a token of the upstream.
	UpstreamGrantTokenExchange UpstreamGrant = "TokenExchange"
)

// UpstreamSubject is whose token a TokenExchange exchanges.
// +kubebuilder:validation:Enum=ServiceAccount;Agent
type UpstreamSubject string

// The token exchange subjects.
const (
	// UpstreamSubjectServiceAccount exchanges the pod's projected service-account token.
	UpstreamSubjectServiceAccount UpstreamSubject = "ServiceAccount"
	// UpstreamSubjectAgent exchanges the access token the call's agent signed in with, verified
	// by the policy's spec.agentAuth: the upstream's token names the agent (or the person it
	// acts for). The agent's token goes only to the token endpoint, never to the server.
	UpstreamSubjectAgent UpstreamSubject = "Agent"
)

// UpstreamAuth has the sidecar present the server short-lived tokens of the organisation's
// identity provider instead of a static credential (docs/identity.md "Gate → upstream"). Every
// token request names the server's URL as resource (RFC 8707). The tokens, the client secret and
// the private key are mounted into the sidecar only, never into the agent's containers.
//
// +kubebuilder:validation:XValidation:rule="self.grant != 'ClientCredentials' || (has(self.clientID) && (has(self.clientSecretRef) != has(self.privateKeySecretRef)))",message="ClientCredentials needs clientID and exactly one of clientSecretRef and privateKeySecretRef"
// +kubebuilder:validation:XValidation:rule="self.grant != 'TokenExchange' || (has(self.subject) && self.subject == 'Agent') || has(self.serviceAccountTokenAudience)",message="TokenExchange of the service account's token needs serviceAccountTokenAudience"
// +kubebuilder:validation:XValidation:rule="!has(self.subject) || self.subject != 'Agent' || self.grant == 'TokenExchange'",message="subject Agent is for grant TokenExchange"
// +kubebuilder:validation:XValidation:rule="!(has(self.clientSecretRef) && has(self.privateKeySecretRef))",message="set at most one of clientSecretRef and privateKeySecretRef"
type UpstreamAuth struct {
	// grant is ClientCredentials or TokenExchange.
	// +required
	Grant UpstreamGrant `json:"grant,omitempty"`

	// tokenURL is the provider's token endpoint, an https URL.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() == 'https' && url(self).getHost() != ''",message="tokenURL must be an absolute https URL"
	TokenURL string `json:"tokenURL,omitempty"`

	// clientID is the sidecar's client at the provider (optional for TokenExchange when the
	// provider does not authenticate the client).
	// +optional
	// +kubebuilder:validation:MaxLength=512
	ClientID string `json:"clientID,omitempty"`

	// clientSecretRef names the Secret key holding the client secret (client_secret_basic).
	// +optional
	ClientSecretRef *SecretKeyRef `json:"clientSecretRef,omitempty"`

	// privateKeySecretRef names the Secret key holding the client's PEM private key, which signs
	// a private_key_jwt assertion (RFC 7523 §2.2) for every token request.
	// +optional
	PrivateKeySecretRef *SecretKeyRef `json:"privateKeySecretRef,omitempty"`

	// keyID is the assertion's kid; default the key's JWK thumbprint (RFC 7638).
	// +optional
	// +kubebuilder:validation:MaxLength=256
	KeyID string `json:"keyID,omitempty"`

	// subject is whose token TokenExchange exchanges: ServiceAccount (the default), the pod's
	// projected service-account token; or Agent, the access token of the call's agent (the
	// policy must set spec.agentAuth; docs/identity.md "On behalf of the agent"). With Agent,
	// serviceAccountTokenAudience, if set, sends the pod's token as the actor (RFC 8693 §4.1), so
	// the upstream's token names the pod's service account in act.
	// +optional
	Subject UpstreamSubject `json:"subject,omitempty"`

	// serviceAccountTokenAudience is the audience of the pod's projected service-account token
	// that TokenExchange exchanges (the provider's expected audience of the cluster's tokens).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	ServiceAccountTokenAudience string `json:"serviceAccountTokenAudience,omitempty"`

	// resource is sent as resource (RFC 8707); default the server's url.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Resource string `json:"resource,omitempty"`

	// audience is the TokenExchange audience; default resource.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Audience string `json:"audience,omitempty"`

	// scopes are asked for, if any.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=256
	Scopes []string `json:"scopes,omitempty"`
}
