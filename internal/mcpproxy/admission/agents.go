package admission

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/agentoauth"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
	"github.com/actgate/actgate/internal/upstreamauth"
)

// ErrConfig is wrapped by every configuration error of the proxy's admission (NewBearerAgents);
// it is mcpproxy.ErrConfig.
var ErrConfig = errors.New("mcpproxy: invalid configuration")

// AgentAuthenticator names the agent behind an HTTP request from the credential it carries,
// or reports that it carries none of a known agent.
type AgentAuthenticator interface {
	Authenticate(r *http.Request) (agent string, ok bool)
}

// AgentChallenger is an AgentAuthenticator that says why it refused a request and answers
// the refusal itself: internal/agentoauth, whose 401 carries the WWW-Authenticate challenge
// the MCP authorization specification requires (resource_metadata, RFC 9728 §5.1). server
// names the protected resource the request is for.
type AgentChallenger interface {
	AgentAuthenticator
	Challenge(r *http.Request, server string) (agent string, refusal *agentoauth.Refusal)
	WriteRefusal(w http.ResponseWriter, server string, refusal *agentoauth.Refusal)
}

var _ AgentChallenger = (*agentoauth.Verifier)(nil)

// BearerAgents authenticates agents by bearer token (Authorization: Bearer TOKEN), one token
// per agent. Tokens are compared by their SHA-256 digests in constant time.
type BearerAgents struct {
	agents []bearerAgent
}

type bearerAgent struct {
	name   string
	digest [sha256.Size]byte
}

// NewBearerAgents returns the authenticator of tokens, agent name → token. An empty token is
// refused, and so is one token shared by two agents (an act would name either).
func NewBearerAgents(tokens map[string][]byte) (*BearerAgents, error) {
	b := &BearerAgents{}
	seen := map[[sha256.Size]byte]string{}
	for name, tok := range tokens {
		if name == "" || len(tok) == 0 {
			return nil, fmt.Errorf("%w: agent %q has an empty name or token", ErrConfig, name)
		}
		d := sha256.Sum256(tok)
		if other, dup := seen[d]; dup {
			return nil, fmt.Errorf("%w: agents %q and %q share a token", ErrConfig, other, name)
		}
		seen[d] = name
		b.agents = append(b.agents, bearerAgent{name: name, digest: d})
	}
	return b, nil
}

// Authenticate implements AgentAuthenticator. Every configured token is compared, so the time
// taken does not say which agent a guess came close to.
func (b *BearerAgents) Authenticate(r *http.Request) (string, bool) {
	tok, ok := bearer(r)
	if !ok {
		return "", false
	}
	d := sha256.Sum256([]byte(tok))
	found := ""
	for _, a := range b.agents {
		if subtle.ConstantTimeCompare(d[:], a.digest[:]) == 1 {
			found = a.name
		}
	}
	return found, found != ""
}

// bearer is the token of a request's one Authorization: Bearer header.
func bearer(r *http.Request) (string, bool) {
	vs := r.Header.Values("Authorization")
	if len(vs) != 1 {
		return "", false
	}
	scheme, tok, ok := strings.Cut(vs[0], " ")
	if !ok || !strings.EqualFold(scheme, "bearer") || tok == "" || strings.ContainsAny(tok, " \t") {
		return "", false
	}
	return tok, true
}

// SessionLimiter bounds the agent sessions open at once, in total and per agent, across every
// proxy that shares it. A session counts from its initialize until it ends.
type SessionLimiter struct {
	max, perAgent int

	mu      sync.Mutex
	total   int
	byAgent map[string]int
}

// NewSessionLimiter allows max sessions in total and perAgent for any one agent; a bound of 0
// or less is no bound.
func NewSessionLimiter(max, perAgent int) *SessionLimiter {
	return &SessionLimiter{max: max, perAgent: perAgent, byAgent: map[string]int{}}
}

// Acquire counts a new session of agent, or reports which bound refuses it.
func (l *SessionLimiter) Acquire(agent string) error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.max > 0 && l.total >= l.max:
		return fmt.Errorf("the gate already holds %d agent sessions, its limit", l.max)
	case l.perAgent > 0 && l.byAgent[agent] >= l.perAgent:
		return fmt.Errorf("agent %s already holds %d sessions, its limit", agent, l.perAgent)
	}
	l.total++
	l.byAgent[agent]++
	return nil
}

// Release forgets one session of agent.
func (l *SessionLimiter) Release(agent string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if l.byAgent[agent]--; l.byAgent[agent] <= 0 {
		delete(l.byAgent, agent)
	}
}

// Open returns the number of sessions counted now.
func (l *SessionLimiter) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

// SessionLimitError is the JSON-RPC error answering an initialize the limiter refused.
func SessionLimitError(err error) *jsonrpc.Error {
	data, _ := json.Marshal(map[string]string{"code": string(ef.EFSessionLimit)})
	return &jsonrpc.Error{Code: wire.CodeInternalError, Message: fmt.Sprintf("%s: %v; no session was opened", ef.EFSessionLimit, err), Data: data}
}

// agentKey carries the authenticated agent in a request's context.
type agentKey struct{}

// AgentOf returns the agent a request was authenticated as (Authenticate), if any.
func AgentOf(ctx context.Context) (string, bool) {
	a, ok := ctx.Value(agentKey{}).(string)
	return a, ok
}

// Authenticate admits r when the proxy has no authenticator (the configured agent), or when
// its credential names an agent; otherwise it answers 401 with EF_AGENT_UNAUTHENTICATED and
// returns false. The admitted request carries the agent in its context and, for the SDK's
// handler, as the session's user (auth.TokenInfo), so that the SDK refuses a session's
// requests from another agent as it refuses another user's.
func Authenticate(w http.ResponseWriter, r *http.Request, agents AgentAuthenticator, server string) (*http.Request, bool) {
	if agents == nil {
		return r, true
	}
	if ch, ok := agents.(AgentChallenger); ok {
		agent, rf := ch.Challenge(r, server)
		if rf != nil {
			ch.WriteRefusal(w, server, rf)
			return nil, false
		}
		// The verified token travels with the request to the authority service, which verifies
		// it again (a sidecar's word names no agent: docs/identity.md "Agents in a pod"), and as
		// the subject of an on-behalf-of exchange (docs/identity.md "On behalf of the agent"); it
		// is never sent upstream.
		tok, _ := agentoauth.BearerToken(r.Header.Values("Authorization"))
		ctx := agentoauth.WithToken(context.WithValue(r.Context(), agentKey{}, agent), tok)
		if at, err := upstreamauth.ParseAgentToken(tok); err == nil {
			ctx = upstreamauth.WithAgentToken(ctx, at)
		}
		return r.WithContext(ctx), true
	}
	agent, ok := agents.Authenticate(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="actgate"`)
		w.Header().Set("Content-Type", wire.MediaJSON)
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(map[string]string{"code": string(ef.EFAgentUnauthenticated),
			"message": "this endpoint needs the agent's token in Authorization: Bearer (see the gate's agent.tokenFile)"})
		return nil, false
	}
	return r.WithContext(context.WithValue(r.Context(), agentKey{}, agent)), true
}

// SDKAuth wraps the SDK's handler so that every request reaching it carries the authenticated
// agent as auth.TokenInfo (the agent was authenticated by Authenticate already).
func SDKAuth(h http.Handler, agents AgentAuthenticator) http.Handler {
	if agents == nil {
		return h
	}
	verify := func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		agent, ok := ctx.Value(agentKey{}).(string)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		// The token lives as long as the gate's configuration; the SDK wants an expiry.
		info := &auth.TokenInfo{UserID: agent, Expiration: time.Now().Add(24 * time.Hour)}
		info.Extra = map[string]any{}
		if tok := agentoauth.TokenFrom(ctx); tok != "" {
			info.Extra[tokenExtra] = tok // for the request's tools/call (TokenOf)
		}
		if at, ok := upstreamauth.AgentTokenOf(ctx); ok {
			info.Extra[agentTokenExtra] = at // for the request's tools/call (WithRequestAgentToken)
		}
		return info, nil
	}
	return auth.RequireBearerToken(verify, nil)(h)
}

// tokenExtra is the auth.TokenInfo Extra key of the agent's verified access token.
const tokenExtra = "actgate.io/agent-token"

// TokenOf is the agent's verified access token an MCP request the SDK's handler delivers came
// with (SDKAuth), or "": the SDK hands its handlers a context of the session, not of the
// request, so the token of each request reaches its tools/call this way.
func TokenOf(extra *mcp.RequestExtra) string {
	if extra == nil || extra.TokenInfo == nil {
		return ""
	}
	tok, _ := extra.TokenInfo.Extra[tokenExtra].(string)
	return tok
}

// agentTokenExtra is the auth.TokenInfo Extra key of the agent's verified token of a request
// with its expiry.
const agentTokenExtra = "actgate.io/agent-oauth-token"

// WithRequestAgentToken returns ctx carrying the agent's verified token of the MCP request the
// SDK's handler delivers with extra (SDKAuth), replacing any other: the SDK hands its handlers
// the session's context, not the request's, and an on-behalf-of exchange must use the token of
// the call (docs/identity.md "On behalf of the agent"). Without one, ctx carries none, so that an
// earlier request's token is never used.
func WithRequestAgentToken(ctx context.Context, extra *mcp.RequestExtra) context.Context {
	var at upstreamauth.AgentToken
	if extra != nil && extra.TokenInfo != nil {
		at, _ = extra.TokenInfo.Extra[agentTokenExtra].(upstreamauth.AgentToken)
	}
	return upstreamauth.WithAgentToken(ctx, at)
}
