package gateconfig

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Agent authentication modes (agent.authentication).
const (
	// AuthToken: every request to /mcp/{server} carries a configured agent's token
	// (Authorization: Bearer). The default.
	AuthToken = "token"
	// AuthNone: every local process that reaches the listener is the agent agent.name. Only
	// for a machine with one user and nothing else listening.
	AuthNone = "none"
)

// AgentsDir holds NAME.token for each agent without a tokenFile (0600, in a 0700 directory,
// created on first start).
const AgentsDir = "agents"

// Defaults of Limits.
const (
	DefaultMaxSessions                 = 256
	DefaultMaxSessionsPerAgent         = 64
	DefaultMaxPendingMomentsPerAgent   = 64
	DefaultMaxPendingMomentsPerSession = 16
	// DefaultMaxHostLoopCalls and DefaultMaxHostLoopCallsPerAgent are hostloop.DefaultMaxPending
	// and hostloop.DefaultMaxPendingPerAgent (gateconfig does not import the host loop).
	DefaultMaxHostLoopCalls         = 1024
	DefaultMaxHostLoopCallsPerAgent = 256
	DefaultReadTimeout              = 30 * time.Second
	// ReadHeaderTimeout and IdleTimeout of the gate's listener.
	ReadHeaderTimeout = 10 * time.Second
	IdleTimeout       = 2 * time.Minute
)

// ExtraAgent is one more agent the gate serves (agents[]), beside agent.
type ExtraAgent struct {
	// Name is the agent's identity, as agent.name.
	Name string `json:"name"`
	// TokenFile holds the agent's token. Default DataDir/agents/NAME.token.
	TokenFile string `json:"tokenFile,omitempty"`
}

// Limits bound what agents can make the gate hold.
type Limits struct {
	// Sessions bounds the agent sessions open at once, all servers and agents together.
	// Default DefaultMaxSessions.
	Sessions int `json:"sessions,omitempty"`
	// SessionsPerAgent bounds one agent's open sessions. Default DefaultMaxSessionsPerAgent.
	SessionsPerAgent int `json:"sessionsPerAgent,omitempty"`
	// PendingMomentsPerAgent bounds one agent's pending binding moments. Default
	// DefaultMaxPendingMomentsPerAgent.
	PendingMomentsPerAgent int `json:"pendingMomentsPerAgent,omitempty"`
	// PendingMomentsPerSession bounds one session's pending binding moments. Default
	// DefaultMaxPendingMomentsPerSession.
	PendingMomentsPerSession int `json:"pendingMomentsPerSession,omitempty"`
	// HostLoopCalls bounds the host-loop calls (/v1/enforce) under way at once, all agents
	// together: a call counts until the gate recorded its outcome. Default
	// hostloop.DefaultMaxPending (1024).
	HostLoopCalls int `json:"hostLoopCalls,omitempty"`
	// HostLoopCallsPerAgent bounds one agent's host-loop calls under way. Default
	// hostloop.DefaultMaxPendingPerAgent (256).
	HostLoopCallsPerAgent int `json:"hostLoopCallsPerAgent,omitempty"`
	// ReadTimeout bounds reading one request (headers and body), as a Go duration from 1s to
	// 10m. Default DefaultReadTimeout. Read it with ReadTimeout.
	ReadTimeout string `json:"readTimeout,omitempty"`
}

// validateAgents checks agent.authentication, agent.tokenFile, agents[] and limits.
func (c *Config) validateAgents(bad func(field, format string, args ...any)) {
	switch c.Agent.Authentication {
	case "":
		c.Agent.Authentication = AuthToken
	case AuthToken, AuthNone, AuthOAuth:
	default:
		bad("agent.authentication", "must be %q, %q or %q", AuthToken, AuthOAuth, AuthNone)
	}
	c.validateOAuth(bad)
	if c.Agent.TokenFile != "" {
		c.Agent.TokenFile = c.resolve(c.Agent.TokenFile)
	}
	if m := c.Agent.Authentication; (m == AuthNone || m == AuthOAuth) && (c.Agent.TokenFile != "" || len(c.Agents) > 0) {
		bad("agent.authentication", "is %q: agent.tokenFile and agents[] need %q", m, AuthToken)
	}
	seen := map[string]bool{c.Agent.Name: true}
	files := map[string]string{}
	if c.Agent.TokenFile != "" {
		files[c.Agent.TokenFile] = c.Agent.Name
	}
	for i := range c.Agents {
		a := &c.Agents[i]
		f := fmt.Sprintf("agents[%d].name", i)
		switch {
		case !dnsLabel.MatchString(a.Name) || len(a.Name) > 63:
			bad(f, "must be a DNS label (it names the token file)")
		case seen[a.Name]:
			bad(f, "duplicate agent %q", a.Name)
		case c.Principal(a.Name):
			bad(f, "an agent cannot be a principal: it would resolve its own escalations")
		case a.Name == c.SinkID:
			bad(f, "the sink cannot be an agent")
		}
		seen[a.Name] = true
		if a.TokenFile != "" {
			a.TokenFile = c.resolve(a.TokenFile)
			if other, dup := files[a.TokenFile]; dup {
				bad(fmt.Sprintf("agents[%d].tokenFile", i), "is also %s's: each agent needs its own token", other)
			}
			files[a.TokenFile] = a.Name
		}
	}
	if c.Agent.Authentication == AuthToken && c.Agent.TokenFile == "" && (!dnsLabel.MatchString(c.Agent.Name) || len(c.Agent.Name) > 63) {
		bad("agent.tokenFile", "required when agent.name is not a DNS label (the default file is named after it)")
	}
	for _, l := range []struct {
		field string
		v     *int
		def   int
	}{
		{"limits.sessions", &c.Limits.Sessions, DefaultMaxSessions},
		{"limits.sessionsPerAgent", &c.Limits.SessionsPerAgent, DefaultMaxSessionsPerAgent},
		{"limits.pendingMomentsPerAgent", &c.Limits.PendingMomentsPerAgent, DefaultMaxPendingMomentsPerAgent},
		{"limits.pendingMomentsPerSession", &c.Limits.PendingMomentsPerSession, DefaultMaxPendingMomentsPerSession},
		{"limits.hostLoopCalls", &c.Limits.HostLoopCalls, DefaultMaxHostLoopCalls},
		{"limits.hostLoopCallsPerAgent", &c.Limits.HostLoopCallsPerAgent, DefaultMaxHostLoopCallsPerAgent},
	} {
		switch {
		case *l.v == 0:
			*l.v = l.def
		case *l.v < 0 || *l.v > 100000:
			bad(l.field, "must be between 1 and 100000")
		}
	}
	c.readTimeout = boundedDuration(bad, "limits.readTimeout", c.Limits.ReadTimeout, DefaultReadTimeout, "30s", 10*time.Minute, "10m")
}

// ReadTimeout is limits.readTimeout, defaulted.
func (c *Config) ReadTimeout() time.Duration { return c.readTimeout }

// AgentNames lists the agents the gate serves: agent.name, then agents[] in order.
func (c *Config) AgentNames() []string {
	names := make([]string, 0, 1+len(c.Agents))
	names = append(names, c.Agent.Name)
	for _, a := range c.Agents {
		names = append(names, a.Name)
	}
	return names
}

// AgentTokenPath is the token file of a configured agent: its tokenFile, or
// DataDir/agents/NAME.token.
func (c *Config) AgentTokenPath(name string) string {
	if name == c.Agent.Name && c.Agent.TokenFile != "" {
		return c.Agent.TokenFile
	}
	for _, a := range c.Agents {
		if a.Name == name && a.TokenFile != "" {
			return a.TokenFile
		}
	}
	return filepath.Join(c.DataDir, AgentsDir, name+".token")
}

// AgentTokens returns each agent's token (agent name → token), nil with authentication
// "none" or "oauth". A token file the configuration names must exist; a default one
// (DataDir/agents/NAME.token) is created on first use with 32 random bytes, hex, mode 0600 in
// a directory of mode 0700. A token file group or others can read is refused, and so is a
// token shorter than 32 characters.
func (c *Config) AgentTokens() (map[string][]byte, error) {
	if c.Agent.Authentication == AuthNone || c.Agent.Authentication == AuthOAuth {
		return nil, nil
	}
	out := map[string][]byte{}
	for _, name := range c.AgentNames() {
		path := c.AgentTokenPath(name)
		explicit := path != filepath.Join(c.DataDir, AgentsDir, name+".token")
		tok, err := agentToken(path, !explicit)
		if err != nil {
			return nil, fmt.Errorf("agent %s: %w", name, err)
		}
		out[name] = tok
	}
	return out, nil
}

// agentToken reads the token at path, creating it when create and it does not exist.
func agentToken(path string, create bool) ([]byte, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) && create {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, err
		}
		if err := privateDir(filepath.Dir(path)); err != nil {
			return nil, err
		}
		var r [32]byte
		_, _ = rand.Read(r[:])
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			return agentToken(path, false)
		}
		if err != nil {
			return nil, err
		}
		tok := hex.EncodeToString(r[:])
		_, werr := f.WriteString(tok + "\n")
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			_ = os.Remove(path)
			return nil, werr
		}
		return []byte(tok), nil
	}
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s has mode %v: it must not be accessible to group or others (chmod 600)", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < 32 || strings.ContainsAny(tok, " \t\r\n") {
		return nil, fmt.Errorf("%s: the token must be one line of at least 32 characters", path)
	}
	return []byte(tok), nil
}

// privateDir refuses a directory that group or others can write.
func privateDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s has mode %v: it must not be writable by group or others (chmod 700)", dir, fi.Mode().Perm())
	}
	return nil
}

// HTTPServer is the gate's HTTP server for h: ReadHeaderTimeout and limits.readTimeout bound
// reading a request (a slow client is cut off; internal/mcpproxy lifts the read deadline once
// an MCP request's body is read, and bounds the writing of its answer), IdleTimeout closes
// idle keep-alive connections.
func (c *Config) HTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: min(ReadHeaderTimeout, c.readTimeout),
		ReadTimeout: c.readTimeout, IdleTimeout: IdleTimeout}
}
