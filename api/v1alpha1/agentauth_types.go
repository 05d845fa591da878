package v1alpha1

// AgentAuth has the agents of the selected pods sign in to their sidecar with access tokens of
// the organisation's identity provider (docs/identity.md "Agents in a pod"), for pods that run
// several agents: the sidecar is an OAuth protected resource (RFC 9728 metadata, the MCP
// authorization specification's 401 challenge), and the authority service verifies each
// agent's token itself — the sidecar runs in the agent's pod, so the agent it names is never
// taken on its word. A claim of the token names the agent on Acts, binding moments and
// receipts.
type AgentAuth struct {
	// issuer is the provider's issuer URL (https), which tokens carry as iss exactly. Its
	// discovery document (ISSUER/.well-known/openid-configuration) names the key set.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() == 'https' && url(self).getHost() != ''",message="issuer must be an absolute https URL"
	Issuer string `json:"issuer,omitempty"`

	// audience is the aud every agent token must carry (RFC 8707: the resource the provider
	// issued the token for), e.g. api://actgate-agents. Tokens for another resource are refused.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	Audience string `json:"audience,omitempty"`

	// agentClaim is the token claim that names the agent (a string): azp or client_id for a
	// machine client, sub for a person's agent. Default sub.
	// +optional
	// +kubebuilder:default=sub
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	AgentClaim string `json:"agentClaim,omitempty"`

	// agentPrefix is put before the claim's value, e.g. "idp:", so that agents of the
	// provider are told apart from service accounts and principals.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	AgentPrefix string `json:"agentPrefix,omitempty"`

	// scopes must all be in the token's scope or scp claim.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=256
	Scopes []string `json:"scopes,omitempty"`

	// jwksURL is the key set's URL (https); omitted: the discovery document's jwks_uri.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() == 'https' && url(self).getHost() != ''",message="jwksURL must be an absolute https URL"
	JWKSURL string `json:"jwksURL,omitempty"`

	// caBundle is the PEM CA bundle trusted for the provider's TLS; omitted: the system roots.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	CABundle string `json:"caBundle,omitempty"`
}
