package agent2026

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/actgate/actgate/internal/mcpproxy/stateless"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// statelessClientNotifications are those of MCP 2026-07-28: only notifications/cancelled (the
// revision removed the handshake, and a server asks for input with input_required results, not
// with requests whose progress or roots a client would report).
var statelessClientNotifications = map[string]bool{wire.NotifyCancelled: true}

// upLeg is one 2026-07-28 request of an agent in flight upstream: the id the gate sent it
// under, and the upstream session it went on (nil toward a stateless upstream).
type upLeg struct {
	up      jsonrpc.ID
	session *upstreamSession
	version string // the request's revision, toward a stateless upstream
}

// legKey names an agent's request by its own JSON-RPC id. Two of one agent's requests in
// flight may share an id (its 2026-07-28 clients share its scope); a cancellation names both.
type legKey struct {
	agent string
	id    jsonrpc.ID
}

// legTable is the 2026-07-28 requests in flight upstream, by agent and the agent's id, for the
// agent's notifications/cancelled: only an agent's own request in flight is cancelled, and
// upstream under the id the gate sent it with. At most maxRelayed per agent; a request beyond
// it is sent all the same, and a cancellation of it is not relayed.
type legTable struct {
	legs  map[legKey][]*upLeg
	count map[string]int
}

// newUpID is an id of the gate's own for the upstream leg: "actgate-N", unique in the process,
// so that no id an agent chooses names another agent's request upstream.
func newUpID() jsonrpc.ID {
	id, _ := jsonrpc.MakeID("actgate-" + strconv.FormatUint(wire.CallSeq.Add(1), 10))
	return id
}

// trackLeg records that the agent's request id is in flight upstream as l; the returned func
// forgets it. The caller holds no lock.
func (p *Handler) trackLeg(agent string, id jsonrpc.ID, l *upLeg) func() {
	st := &p.sl
	st.mu.Lock()
	defer st.mu.Unlock()
	if !id.IsValid() || st.legs.count[agent] >= maxRelayed {
		return func() {}
	}
	if st.legs.legs == nil {
		st.legs.legs = map[legKey][]*upLeg{}
		st.legs.count = map[string]int{}
	}
	k := legKey{agent, id}
	st.legs.legs[k] = append(st.legs.legs[k], l)
	st.legs.count[agent]++
	return func() {
		st.mu.Lock()
		defer st.mu.Unlock()
		ls := st.legs.legs[k]
		for i, o := range ls {
			if o == l {
				ls = append(ls[:i], ls[i+1:]...)
				break
			}
		}
		if len(ls) == 0 {
			delete(st.legs.legs, k)
		} else {
			st.legs.legs[k] = ls
		}
		if n := st.legs.count[agent] - 1; n > 0 {
			st.legs.count[agent] = n
		} else {
			delete(st.legs.count, agent)
		}
	}
}

// legsOf returns the agent's requests in flight under its id.
func (p *Handler) legsOf(agent string, id jsonrpc.ID) []*upLeg {
	p.sl.mu.Lock()
	defer p.sl.mu.Unlock()
	return append([]*upLeg(nil), p.sl.legs.legs[legKey{agent, id}]...)
}

// statelessCancel relays an agent's 2026-07-28 notifications/cancelled upstream for each of the
// agent's own requests in flight under the id it names, with the id the gate sent that request
// under (every other member of its params as the agent wrote them; toward a stateful upstream
// without the revision's _meta members, on the session the request went on). A cancellation
// naming no request of the agent's in flight (another agent's, one answered, one never sent, a
// malformed one) is not relayed: the revision lets a receiver ignore it.
func (p *Handler) statelessCancel(ctx context.Context, agent string, sr *stateless.Request) {
	id, _, ok := wire.ParseCancelled(sr.Req.Params)
	if !ok {
		p.log.Info("Agent cancellation not relayed: it names no request id")
		return
	}
	legs := p.legsOf(agent, id)
	if len(legs) == 0 {
		p.log.Info("Agent cancellation not relayed: it names no request of the agent in flight upstream")
		return
	}
	ctx = context.WithoutCancel(ctx)
	for _, l := range legs {
		params, ok := withRequestID(sr.Req.Params, l.up)
		if !ok {
			return
		}
		h := http.Header{}
		if l.session != nil {
			params = forStateful(params, true)
			h = sessionHeaders(l.session)
		} else {
			h.Set(wire.HeaderProtocolVersion, l.version)
			h.Set(wire.HeaderMethod, wire.NotifyCancelled)
		}
		body, err := jsonrpc.EncodeMessage(&jsonrpc.Request{Method: wire.NotifyCancelled, Params: params})
		if err != nil {
			return
		}
		p.postNotification(ctx, h, sr, body)
	}
}

// withRequestID returns a notifications/cancelled's params with requestId set to id, every
// other member as written; false for params that are not an object.
func withRequestID(params json.RawMessage, id jsonrpc.ID) (json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(params, &m) != nil || m == nil {
		return nil, false
	}
	raw, err := json.Marshal(id.Raw())
	if err != nil {
		return nil, false
	}
	m["requestId"] = raw
	out, err := wire.MarshalNoEscape(m)
	if err != nil {
		return nil, false
	}
	return bytes.TrimSpace(out), true
}

type legIDsKey struct{}

// legIDs are the upstream leg's id and the agent's id of a request sent toward a stateless
// upstream under an id of the gate's own: what the upstream's messages name by the leg's id
// (a listen's subscription id) is given back to the agent under its own.
type legIDs struct {
	up, agent       jsonrpc.ID
	upRaw, agentRaw json.RawMessage
}

func withLegIDs(ctx context.Context, up, agent jsonrpc.ID) context.Context {
	upRaw, err1 := json.Marshal(up.Raw())
	agentRaw, err2 := json.Marshal(agent.Raw())
	if err1 != nil || err2 != nil {
		return ctx
	}
	return context.WithValue(ctx, legIDsKey{}, &legIDs{up: up, agent: agent, upRaw: upRaw, agentRaw: agentRaw})
}

// relabel gives back to the agent, under its own id, what an upstream message of the exchange
// names by the leg's id: a subscriptions/listen's subscription id in _meta, a cancellation's
// requestId. Anything else is returned as it is.
func relabel(ctx context.Context, m *jsonrpc.Request) *jsonrpc.Request {
	ids, _ := ctx.Value(legIDsKey{}).(*legIDs)
	if ids == nil || len(m.Params) == 0 {
		return m
	}
	var p struct {
		RequestID json.RawMessage            `json:"requestId"`
		Meta      map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(m.Params, &p) != nil {
		return m
	}
	out := *m
	if bytes.Equal(bytes.TrimSpace(p.Meta[wire.MetaSubscriptionID]), ids.upRaw) {
		if params, ok := stateless.StampSubscription(out.Params, ids.agentRaw); ok {
			out.Params = params
		}
	}
	if m.Method == wire.NotifyCancelled && bytes.Equal(bytes.TrimSpace(p.RequestID), ids.upRaw) {
		if params, ok := withRequestID(out.Params, ids.agent); ok {
			out.Params = params
		}
	}
	return &out
}

// relabelResult gives back a result's _meta subscription id (a listen's final result) under the
// agent's id.
func relabelResult(ctx context.Context, raw json.RawMessage) json.RawMessage {
	ids, _ := ctx.Value(legIDsKey{}).(*legIDs)
	// The subscription id is compared as written, so a result that does not contain the
	// upstream id's bytes has none to relabel, without a parse.
	if ids == nil || len(raw) == 0 || !bytes.Contains(raw, ids.upRaw) {
		return raw
	}
	var r struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(raw, &r) != nil || !bytes.Equal(bytes.TrimSpace(r.Meta[wire.MetaSubscriptionID]), ids.upRaw) {
		return raw
	}
	if out, ok := stateless.StampSubscription(raw, ids.agentRaw); ok {
		return out
	}
	return raw
}
