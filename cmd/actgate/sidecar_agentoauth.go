package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"

	"github.com/actgate/actgate/api/v1alpha1"
)

// agentSettings reads --agent-oauth and checks --external-url, reporting problems with bad.
func (o *sidecarOptions) agentSettings(bad func(string, ...any)) *v1alpha1.AgentAuth {
	a, err := parseAgentOAuth(o.agentOAuth)
	if err != nil {
		bad("--agent-oauth ($%s): %v", envAgentOAuth, err)
	}
	if o.externalURL != "" {
		if u, err := url.Parse(o.externalURL); err != nil || u.Scheme != "http" || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
			bad("--external-url %q is not http://HOST:PORT", o.externalURL)
		}
	}
	return a
}

// maxAgentOAuthBytes bounds --agent-oauth: a spec.agentAuth with its CA bundle.
const maxAgentOAuthBytes = 96 << 10

// parseAgentOAuth reads --agent-oauth, the ToolPolicy's spec.agentAuth as JSON (the injector
// marshals it), strictly: one object of known members, an https issuer (and jwksURL), an
// audience. Empty is nil: the pod's service account is the agent.
func parseAgentOAuth(s string) (*v1alpha1.AgentAuth, error) {
	if s == "" {
		return nil, nil
	}
	if len(s) > maxAgentOAuthBytes {
		return nil, fmt.Errorf("longer than %d bytes", maxAgentOAuthBytes)
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.DisallowUnknownFields()
	var a v1alpha1.AgentAuth
	if err := dec.Decode(&a); err != nil {
		return nil, fmt.Errorf("not a spec.agentAuth object: %v", err)
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value")
	}
	if err := httpsURL(a.Issuer); err != nil {
		return nil, fmt.Errorf("issuer: %w", err)
	}
	if a.JWKSURL != "" {
		if err := httpsURL(a.JWKSURL); err != nil {
			return nil, fmt.Errorf("jwksURL: %w", err)
		}
	}
	if a.Audience == "" {
		return nil, errors.New("audience is required")
	}
	return &a, nil
}

func httpsURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return errors.New("an absolute https URL is required")
	}
	return nil
}
