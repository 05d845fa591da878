package inject

import (
	"encoding/json"
	"fmt"

	"github.com/actgate/actgate/api/v1alpha1"
)

// Files of a server's identity-provider credentials in the credentials volume, under <server>/
// (docs/identity.md "Gate → upstream").
const (
	ClientSecretFileName        = "client-secret"
	PrivateKeyFileName          = "private-key"
	ServiceAccountTokenFileName = "sa-token"
)

// jwtTokenType is RFC 8693's token type of a JWT: the pod's projected service-account token.
const jwtTokenType = "urn:ietf:params:oauth:token-type:jwt"

// ServiceAccountToken is a projected service-account token for a server's token exchange.
type ServiceAccountToken struct {
	Audience, Path string
}

// upstreamOAuth is one server's OAuth settings as the sidecar reads them from
// ACTGATE_UPSTREAM_OAUTH (gateconfig.UpstreamOAuth's fields; files relative to the credentials
// folder).
type upstreamOAuth struct {
	Grant            string   `json:"grant"`
	TokenURL         string   `json:"tokenURL"`
	ClientID         string   `json:"clientID,omitempty"`
	ClientSecretFile string   `json:"clientSecretFile,omitempty"`
	PrivateKeyFile   string   `json:"privateKeyFile,omitempty"`
	KeyID            string   `json:"keyID,omitempty"`
	SubjectTokenFile string   `json:"subjectTokenFile,omitempty"`
	Subject          string   `json:"subject,omitempty"`
	ActorTokenFile   string   `json:"actorTokenFile,omitempty"`
	ActorTokenType   string   `json:"actorTokenType,omitempty"`
	Resource         string   `json:"resource,omitempty"`
	Audience         string   `json:"audience,omitempty"`
	Scopes           []string `json:"scopes,omitempty"`
}

// upstreamAuth returns, for the servers with spec.servers[].auth, the projected
// service-account tokens their token exchange needs and the sidecar's ACTGATE_UPSTREAM_OAUTH
// value ("" when no server has auth). The Secrets they name are projected with the other
// credentials (credentialProjection).
func upstreamAuth(servers []v1alpha1.ToolServer) ([]ServiceAccountToken, string, error) {
	var tokens []ServiceAccountToken
	settings := map[string]upstreamOAuth{}
	for _, s := range servers {
		a := s.Auth
		if a == nil {
			continue
		}
		o := upstreamOAuth{TokenURL: a.TokenURL, ClientID: a.ClientID, KeyID: a.KeyID, Resource: a.Resource, Audience: a.Audience, Scopes: a.Scopes}
		switch a.Grant {
		case v1alpha1.UpstreamGrantClientCredentials:
			o.Grant = "client_credentials"
		case v1alpha1.UpstreamGrantTokenExchange:
			o.Grant = "token_exchange"
			sa := s.Name + "/" + ServiceAccountTokenFileName
			switch a.Subject {
			case v1alpha1.UpstreamSubjectAgent:
				// The agent's verified token is the subject; the pod's token, when asked for,
				// the actor (RFC 8693 §4.1).
				o.Subject = "agent"
				if a.ServiceAccountTokenAudience != "" {
					o.ActorTokenFile, o.ActorTokenType = sa, jwtTokenType
					tokens = append(tokens, ServiceAccountToken{Audience: a.ServiceAccountTokenAudience, Path: sa})
				}
			default:
				o.SubjectTokenFile = sa
				tokens = append(tokens, ServiceAccountToken{Audience: a.ServiceAccountTokenAudience, Path: sa})
			}
		default:
			return nil, "", fmt.Errorf("%w: server %s: auth.grant %q is not ClientCredentials or TokenExchange", ErrNotInjectable, s.Name, a.Grant)
		}
		if a.ClientSecretRef != nil {
			o.ClientSecretFile = s.Name + "/" + ClientSecretFileName
		}
		if a.PrivateKeySecretRef != nil {
			o.PrivateKeyFile = s.Name + "/" + PrivateKeyFileName
		}
		settings[s.Name] = o
	}
	if len(settings) == 0 {
		return nil, "", nil
	}
	b, err := json.Marshal(settings)
	if err != nil {
		return nil, "", err
	}
	return tokens, string(b), nil
}

// credentialRefs are the Secret keys a server's sidecar needs, each with its path in the
// credentials volume: the static credential, or the identity provider's client secret or key.
func credentialRefs(s v1alpha1.ToolServer) []struct {
	ref  *v1alpha1.SecretKeyRef
	path string
} {
	type item = struct {
		ref  *v1alpha1.SecretKeyRef
		path string
	}
	var out []item
	if s.CredentialsSecretRef != nil {
		out = append(out, item{s.CredentialsSecretRef, s.Name + "/credential"})
	}
	if a := s.Auth; a != nil {
		if a.ClientSecretRef != nil {
			out = append(out, item{a.ClientSecretRef, s.Name + "/" + ClientSecretFileName})
		}
		if a.PrivateKeySecretRef != nil {
			out = append(out, item{a.PrivateKeySecretRef, s.Name + "/" + PrivateKeyFileName})
		}
	}
	return out
}
