package main

import (
	"strings"
	"testing"
)

// TestParseAgentOAuth: --agent-oauth ($ACTGATE_AGENT_OAUTH) is the policy's spec.agentAuth as
// JSON, read strictly: empty is none; unknown members, a second value, a non-https issuer or
// key set URL, a missing audience, an oversized value are usage errors, never a default.
func TestParseAgentOAuth(t *testing.T) {
	if a, err := parseAgentOAuth(""); a != nil || err != nil {
		t.Fatalf("empty: %+v %v", a, err)
	}
	a, err := parseAgentOAuth(`{"issuer":"https://idp.example/","audience":"api://agents","agentClaim":"azp","agentPrefix":"idp:","scopes":["mcp.call"]}`)
	if err != nil || a.Issuer != "https://idp.example/" || a.Audience != "api://agents" || a.AgentClaim != "azp" || a.AgentPrefix != "idp:" || len(a.Scopes) != 1 {
		t.Fatalf("good: %+v %v", a, err)
	}
	for name, in := range map[string]string{
		"not JSON":          `issuer: https://idp.example`,
		"an array":          `[]`,
		"unknown member":    `{"issuer":"https://idp.example","audience":"a","allowNone":true}`,
		"two values":        `{"issuer":"https://idp.example","audience":"a"}{}`,
		"http issuer":       `{"issuer":"http://idp.example","audience":"a"}`,
		"issuer no host":    `{"issuer":"https:///x","audience":"a"}`,
		"no issuer":         `{"audience":"a"}`,
		"no audience":       `{"issuer":"https://idp.example"}`,
		"http key set":      `{"issuer":"https://idp.example","audience":"a","jwksURL":"http://idp.example/keys"}`,
		"wrong member type": `{"issuer":"https://idp.example","audience":"a","scopes":"mcp.call"}`,
		"oversized":         `{"issuer":"https://idp.example","audience":"a","caBundle":"` + strings.Repeat("A", maxAgentOAuthBytes) + `"}`,
	} {
		if a, err := parseAgentOAuth(in); err == nil || a != nil {
			t.Errorf("%s: accepted %+v", name, a)
		}
	}
}

// FuzzParseAgentOAuth: no input panics, and what is accepted has an https issuer and an
// audience.
func FuzzParseAgentOAuth(f *testing.F) {
	f.Add(`{"issuer":"https://idp.example/","audience":"api://agents"}`)
	f.Add(`{"issuer":"https://idp.example","audience":"a","jwksURL":"https://idp.example/k","caBundle":"x"}`)
	f.Add(`{"issuer":"http://x"}`)
	f.Fuzz(func(t *testing.T, in string) {
		a, err := parseAgentOAuth(in)
		if err != nil || a == nil {
			return
		}
		if !strings.HasPrefix(strings.ToLower(a.Issuer), "https://") || a.Audience == "" {
			t.Fatalf("accepted %+v", a)
		}
	})
}
