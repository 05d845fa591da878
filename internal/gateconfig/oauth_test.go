package gateconfig

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func oauthDoc(extra string) string {
	return strings.Replace(minimal, "  name: agent-1", "  name: agent-1\n  authentication: oauth\n  oauth:\n    issuer: https://idp.example\n"+extra, 1)
}

// TestAgentOAuth: agent.authentication oauth defaults the audience to externalURL (itself
// http://LISTEN by default), the algorithms to asymmetric ones and the agent claim to sub; it
// needs no token files; none, HS* and other bad fields are refused by field.
func TestAgentOAuth(t *testing.T) {
	dir := t.TempDir()
	c, err := Parse([]byte(oauthDoc("")), dir)
	if err != nil {
		t.Fatal(err)
	}
	o := c.Agent.OAuth
	if c.ExternalURL != "http://"+DefaultListen || o.Audience != c.ExternalURL || o.AgentClaim != "sub" || !slices.Equal(o.Algorithms, DefaultOAuthAlgorithms) {
		t.Fatalf("defaults: %q %+v", c.ExternalURL, o)
	}
	if skew, refresh, age := o.Bounds(); skew != DefaultOAuthClockSkew || refresh != DefaultOAuthJWKSRefresh || age != DefaultOAuthJWKSMaxAge {
		t.Fatalf("bounds %v %v %v", skew, refresh, age)
	}
	if toks, err := c.AgentTokens(); toks != nil || err != nil {
		t.Fatalf("oauth needs no token files: %v %v", toks, err)
	}
	set, err := Parse([]byte("externalURL: https://gate.example/\n"+oauthDoc("    agentClaim: azp\n    agentPrefix: 'idp:'\n    scopes: [mcp.call]\n    clockSkew: 0s\n    jwksRefresh: 5s\n    caFile: ca.pem\n")), dir)
	if err != nil {
		t.Fatal(err)
	}
	if set.ExternalURL != "https://gate.example" || set.Agent.OAuth.Audience != "https://gate.example" || set.Agent.OAuth.AgentClaim != "azp" {
		t.Fatalf("set: %q %+v", set.ExternalURL, set.Agent.OAuth)
	}
	if skew, refresh, _ := set.Agent.OAuth.Bounds(); skew != 0 || refresh != 5*time.Second {
		t.Fatalf("bounds %v %v", skew, refresh)
	}
	for _, tc := range []struct{ name, doc, field string }{
		{"oauth without its section", strings.Replace(minimal, "  name: agent-1", "  name: agent-1\n  authentication: oauth", 1), "agent.oauth"},
		{"section without oauth", strings.Replace(minimal, "  name: agent-1", "  name: agent-1\n  oauth:\n    issuer: https://idp.example", 1), "agent.oauth"},
		{"http issuer", strings.Replace(oauthDoc(""), "https://idp.example", "http://idp.example", 1), "agent.oauth.issuer"},
		{"alg none", oauthDoc("    algorithms: [none]\n"), "agent.oauth.algorithms[0]"},
		{"alg HS256", oauthDoc("    algorithms: [RS256, HS256]\n"), "agent.oauth.algorithms[1]"},
		{"http jwks", oauthDoc("    jwksURL: http://idp.example/keys\n"), "agent.oauth.jwksURL"},
		{"claim with a space", oauthDoc("    agentClaim: 'a b'\n"), "agent.oauth.agentClaim"},
		{"scope with a quote", oauthDoc("    scopes: ['a\"b']\n"), "agent.oauth.scopes[0]"},
		{"huge skew", oauthDoc("    clockSkew: 1h\n"), "agent.oauth.clockSkew"},
		{"tiny refresh", oauthDoc("    jwksRefresh: 1ms\n"), "agent.oauth.jwksRefresh"},
		{"token file too", strings.Replace(oauthDoc(""), "  authentication: oauth", "  authentication: oauth\n  tokenFile: t", 1), "agent.authentication"},
		{"more agents too", oauthDoc("") + "agents:\n- name: b\n", "agent.authentication"},
		{"http external URL off loopback", "externalURL: http://gate.example\n" + oauthDoc(""), "externalURL"},
		{"external URL with a path", "externalURL: https://gate.example/mcp\n" + oauthDoc(""), "externalURL"},
		{"port 0 without external URL", "listen: 127.0.0.1:0\n" + oauthDoc(""), "externalURL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc), dir)
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("error %v, want one about %s", err, tc.field)
			}
		})
	}
}
