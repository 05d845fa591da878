package agentoauth

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/actgate/actgate/internal/ef"
)

// MetadataPath is the RFC 9728 §3 well-known path of the protected resource metadata; a
// resource with a path has its metadata at MetadataPath + its path.
const MetadataPath = "/.well-known/oauth-protected-resource"

// Authenticate names the agent of r's bearer token for the gate as a whole (the host-loop
// endpoints): the mcpproxy.AgentAuthenticator shape.
func (v *Verifier) Authenticate(r *http.Request) (string, bool) {
	agent, rf := v.Challenge(r, "")
	return agent, rf == nil
}

// Challenge names the agent of r's bearer token for server's protected resource, or returns
// the Refusal (Bearer token syntax: RFC 6750 §2.1, one Authorization header).
func (v *Verifier) Challenge(r *http.Request, server string) (string, *Refusal) {
	tok, rf := BearerToken(r.Header.Values("Authorization"))
	if rf != nil {
		return "", rf
	}
	return v.Verify(r.Context(), tok, server)
}

// BearerToken is the token of the one Authorization: Bearer header among vs. Without one the
// Refusal carries no OAuth error (RFC 6750 §3.1: a request without authentication is told
// only where to get a token); a malformed one is answered 401 invalid_token, as the MCP
// authorization specification answers every unusable token.
func BearerToken(vs []string) (string, *Refusal) {
	if len(vs) == 0 {
		return "", &Refusal{Status: http.StatusUnauthorized, Code: ef.EFAgentUnauthenticated,
			Description: "this endpoint needs an access token of the organisation's identity provider in Authorization: Bearer"}
	}
	if len(vs) > 1 {
		return "", invalid("the request carries more than one Authorization header")
	}
	scheme, tok, ok := strings.Cut(vs[0], " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", invalid("the Authorization header is not a Bearer token")
	}
	if tok == "" || strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r > '~' }) {
		return "", invalid("the Bearer token is empty or holds characters a token cannot")
	}
	return tok, nil
}

// MetadataURL is the URL of server's protected resource metadata (RFC 9728 §3.1): the
// well-known path with the resource's path appended.
func (v *Verifier) MetadataURL(server string) string {
	if server == "" {
		return v.o.ExternalURL + MetadataPath
	}
	return v.o.ExternalURL + MetadataPath + "/mcp/" + server
}

// WriteRefusal answers rf: its status, the WWW-Authenticate challenge with resource_metadata
// (MCP authorization, "Protected Resource Metadata Discovery"; RFC 9728 §5.1), the OAuth error
// and scope when there are, and a JSON body with the EF code.
func (v *Verifier) WriteRefusal(w http.ResponseWriter, server string, rf *Refusal) {
	c := `Bearer resource_metadata="` + v.MetadataURL(server) + `"`
	if rf.OAuthError != "" {
		c += `, error="` + rf.OAuthError + `", error_description="` + quoteSafe(rf.Description) + `"`
	}
	if rf.Scope != "" {
		c += `, scope="` + quoteSafe(rf.Scope) + `"`
	}
	w.Header().Set("WWW-Authenticate", c)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if rf.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "5")
	}
	w.WriteHeader(rf.Status)
	_ = json.NewEncoder(w).Encode(map[string]string{"code": string(rf.Code), "message": rf.Description})
}

// quoteSafe drops what cannot stand in a quoted-string (RFC 9110 §5.6.4) of the challenge.
func quoteSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '"' || r == '\\' || r < ' ' || r > '~' {
			return -1
		}
		return r
	}, s)
}

// Metadata is a protected resource metadata document (RFC 9728 §2).
type Metadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
	ResourceName           string   `json:"resource_name,omitempty"`
}

// Metadata is server's document ("" for the gate as a whole).
func (v *Verifier) Metadata(server string) Metadata {
	m := Metadata{Resource: v.Resource(server), AuthorizationServers: []string{v.o.Issuer},
		BearerMethodsSupported: []string{"header"}, ScopesSupported: v.o.Scopes, ResourceName: "actgate"}
	if server != "" {
		m.ResourceName = "actgate: " + server
	}
	return m
}

// MetadataHandler serves the documents of the gate (MetadataPath) and of each server
// (MetadataPath/mcp/SERVER, and MetadataPath/SERVER/mcp for the second mount path, whose
// resource is that path); any other path under MetadataPath is 404.
func (v *Verifier) MetadataHandler(servers []string) http.Handler {
	docs := map[string]Metadata{MetadataPath: v.Metadata("")}
	for _, s := range servers {
		docs[MetadataPath+"/mcp/"+s] = v.Metadata(s)
		alt := v.Metadata(s)
		alt.Resource = v.o.ExternalURL + "/" + s + "/mcp"
		docs[MetadataPath+"/"+s+"/mcp"] = alt
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		m, ok := docs[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "max-age=300")
		w.Header().Set("Access-Control-Allow-Origin", "*") // public metadata, read by browser-based clients too
		_ = json.NewEncoder(w).Encode(m)
	})
}
