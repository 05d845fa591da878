package hostloop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/sink"
	"github.com/go-logr/logr"
)

// Sentinel errors of Complete.
var (
	// ErrUnknownOperation: no dispatch of this gate (and this agent) has that operation id.
	ErrUnknownOperation = errors.New("hostloop: no such dispatch")
	// ErrSettled: the dispatch already has an outcome; it is never overwritten.
	ErrSettled = errors.New("hostloop: dispatch already settled")
	// ErrPendingLimit: the host loops hold as many calls under way as Config allows (in total
	// or for the agent); nothing was enforced.
	ErrPendingLimit = errors.New("hostloop: too many host-loop calls under way")
)

// Defaults of Config.
const (
	// DefaultTimeout bounds how long a host loop may take between an allow under authority
	// (/v1/enforce) and its outcome (/v1/complete); past it the dispatch is recorded
	// INDETERMINATE.
	DefaultTimeout = 5 * time.Minute
	// DefaultRecordTimeout bounds one journal read after an outcome.
	DefaultRecordTimeout = 10 * time.Second
	// DefaultMaxPending bounds the host-loop calls under way at once, all agents together: a
	// call counts from its /v1/enforce until the sink recorded its outcome (at once for a
	// refusal or an allow without authority; at /v1/complete or the timeout for a dispatch).
	DefaultMaxPending = 1024
	// DefaultMaxPendingPerAgent bounds the host-loop calls under way for one agent.
	DefaultMaxPendingPerAgent = 256
	// SinkID is the mapping context's sink id of a host-loop block (the sink maps the call
	// again into the act it decides).
	SinkID = "host-loop"
)

// Handler is what the host loop runs a call through: internal/sink's Gate.
type Handler interface {
	Handle(ctx context.Context, c sink.Call, inv sink.Invoker) (sink.Result, error)
}

// Records reads a journaled dispatch (the deployment's journal store).
type Records interface {
	Record(ctx context.Context, operationID string) (journal.DispatchRecord, error)
}

// Config wires a Loop.
type Config struct {
	// Gate decides each call. Required.
	Gate Handler
	// Records is the journal the gate writes. Required.
	Records Records
	// Servers are the protected servers, name → URL; a block naming another is refused
	// EF_UNKNOWN_TOOL. With one server a block may name none. Required.
	Servers map[string]string
	// Principal is the act's initiating principal; empty means the calling agent.
	Principal string
	// RuntimeID is the act's agent.runtime_id. Required.
	RuntimeID string
	// IDs hands out the act ids of the mapping context. Required.
	IDs *act.IDIssuer
	// ActTTL is the mapping context's act lifetime. Optional: sink.DefaultActTTL.
	ActTTL time.Duration
	// Now is the clock. Optional: time.Now.
	Now func() time.Time
	// Timeout bounds a dispatch's wait for its outcome. Optional: DefaultTimeout.
	Timeout time.Duration
	// RecordTimeout bounds a journal read. Optional: DefaultRecordTimeout.
	RecordTimeout time.Duration
	// MaxPending and MaxPendingPerAgent bound the calls under way. Optional: the defaults;
	// negative is no bound.
	MaxPending, MaxPendingPerAgent int
	// Log receives operation ids, codes and outcomes, never argument values. Optional: discard.
	Log logr.Logger
}

// Loop runs host loops' calls through the sink's Handle, as the MCP proxy runs a tools/call:
// the Invoker is the host itself. For a dispatch under authority the Invoker answers
// /v1/enforce with the allow and the operation id, then waits for the host's /v1/complete (or
// Config.Timeout, after which the outcome is unknown: INDETERMINATE), and the sink records the
// outcome, its receipt and its report exactly as for an MCP call. On the hot path the Invoker
// answers the allow and returns at once: nothing is journaled there. Both deployments run it:
// the pod's sidecar (internal/sidecar) and `actgate serve` (internal/standalone).
type Loop struct {
	cfg     Config
	mu      sync.Mutex
	waiting map[string]*hostDispatch // operation id → the dispatch awaiting its outcome
	total   int                      // calls under way
	byAgent map[string]int           // calls under way per agent
	// running counts the host-loop calls under way; closing ends those awaiting an outcome.
	running   sync.WaitGroup
	closing   chan struct{}
	closeOnce sync.Once
}

type hostDispatch struct {
	agent    string             // the agent whose call it is: only it reports the outcome
	report   chan hostReport    // the host's outcome
	recorded chan journal.State // what the sink recorded for it
}

type hostReport struct {
	outcome HostOutcome
	result  json.RawMessage
}

// allowed is what the Invoker tells Enforce when the sink lets the call run.
type allowed struct {
	inv sink.Invocation
}

// ErrConfig is wrapped by every configuration error of New.
var ErrConfig = errors.New("hostloop: invalid configuration")

// New checks cfg and returns its Loop.
func New(cfg Config) (*Loop, error) {
	switch {
	case cfg.Gate == nil || cfg.Records == nil || cfg.IDs == nil:
		return nil, fmt.Errorf("%w: Gate, Records and IDs are required", ErrConfig)
	case len(cfg.Servers) == 0:
		return nil, fmt.Errorf("%w: at least one server is required", ErrConfig)
	case cfg.RuntimeID == "":
		return nil, fmt.Errorf("%w: RuntimeID is required", ErrConfig)
	case cfg.Timeout < 0 || cfg.RecordTimeout < 0 || cfg.ActTTL < 0:
		return nil, fmt.Errorf("%w: durations must not be negative", ErrConfig)
	}
	cfg.Timeout = orDefault(cfg.Timeout, DefaultTimeout)
	cfg.RecordTimeout = orDefault(cfg.RecordTimeout, DefaultRecordTimeout)
	cfg.ActTTL = orDefault(cfg.ActTTL, sink.DefaultActTTL)
	if cfg.MaxPending == 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	if cfg.MaxPendingPerAgent == 0 {
		cfg.MaxPendingPerAgent = DefaultMaxPendingPerAgent
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log.GetSink() == nil {
		cfg.Log = logr.Discard()
	}
	return &Loop{cfg: cfg, waiting: map[string]*hostDispatch{}, byAgent: map[string]int{}, closing: make(chan struct{})}, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// acquire counts a call of agent under way, or refuses it at a bound.
func (h *Loop) acquire(agent string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.cfg.MaxPending > 0 && h.total >= h.cfg.MaxPending:
		return fmt.Errorf("%w: the gate holds %d host-loop calls under way, its limit", ErrPendingLimit, h.cfg.MaxPending)
	case h.cfg.MaxPendingPerAgent > 0 && h.byAgent[agent] >= h.cfg.MaxPendingPerAgent:
		return fmt.Errorf("%w: the agent holds %d host-loop calls under way, its limit; complete them first", ErrPendingLimit, h.cfg.MaxPendingPerAgent)
	}
	h.total++
	h.byAgent[agent]++
	return nil
}

func (h *Loop) release(agent string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.total--
	if h.byAgent[agent]--; h.byAgent[agent] <= 0 {
		delete(h.byAgent, agent)
	}
}

// Pending is the number of host-loop calls under way.
func (h *Loop) Pending() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.total
}

// Enforce is tool-use-binding §16 enforce() for one block a host loop is about to run: allow
// only after the authority was issued, verified, consumed and the dispatch journaled, or when
// the policy allows the call without authority. agent is the authenticated caller. At a bound
// of calls under way it returns ErrPendingLimit and enforces nothing.
func (h *Loop) Enforce(ctx context.Context, agent string, r EnforceRequest) (Decision, error) {
	if err := h.acquire(agent); err != nil {
		return Decision{}, err
	}
	return h.enforce(ctx, agent, r), nil
}

// Complete records the outcome a host loop reports for a dispatch Enforce allowed agent. The
// host loop is the executor of an in-process tool, so its report of executed or failed is the
// authoritative evidence, digested with the result it returned; indeterminate stays
// INDETERMINATE. A dispatch is settled once: a second report is ErrSettled. A dispatch under
// way of another agent is ErrUnknownOperation.
func (h *Loop) Complete(ctx context.Context, agent, operationID string, outcome HostOutcome, result []byte) (journal.DispatchRecord, error) {
	return h.complete(ctx, agent, operationID, outcome, result)
}

// enforce runs one call; the slot acquire counted is released when the sink has recorded the
// call (at once for a refusal, at the outcome for a dispatch).
func (h *Loop) enforce(ctx context.Context, agent string, r EnforceRequest) Decision {
	cfg := &h.cfg
	server := r.Server
	if server == "" && len(cfg.Servers) == 1 {
		for name := range cfg.Servers {
			server = name
		}
	}
	dest, known := cfg.Servers[server]
	if known && r.Destination != "" {
		// The host's live destination, not the configured URL: the policy decides it (the
		// rule's destinations, else the server's own URL) and the authority is bound to it.
		dest = r.Destination
	}
	session := r.Session
	if session == "" {
		session = DefaultHostSession
	}
	principal := cfg.Principal
	if principal == "" {
		principal = agent
	}
	mc := act.MappingContext{
		SessionID: session, Principal: act.Principal{PrincipalID: principal},
		Agent: act.Agent{AgentID: agent, RuntimeID: cfg.RuntimeID}, SinkID: SinkID, Now: cfg.Now, TTL: cfg.ActTTL, IDs: cfg.IDs,
	}
	if known {
		mc.Server, mc.Destination = act.ServerIdentity{Name: server, URL: dest}, dest
	}
	var (
		cand   *act.Candidate
		err    error
		vendor act.Vendor
	)
	// The block is mapped here only to read the tool, the arguments and the vendor id; the
	// sink maps the call again into the act it decides and binds.
	switch r.Vendor {
	case HostAnthropic:
		vendor = act.VendorAnthropic
		cand, err = act.MapAnthropicToolUse(r.Block, mc)
	case HostOpenAI:
		vendor = act.VendorOpenAIChat
		cand, err = act.MapOpenAIToolCall(r.Block, mc)
	case HostOpenAIResponses:
		vendor = act.VendorOpenAIResponses
		cand, err = act.MapResponsesFunctionCall(r.Block, mc)
	default:
		err = badField("vendor", "unknown")
	}
	if err != nil {
		h.release(agent)
		cfg.Log.V(1).Info("Host-loop block not mapped to an act", "server", server, "cause", actCode(err))
		d := act.DenialFor(err)
		return refusedDecision(sink.Result{Code: d.Code, Message: orDescription(d.Code, d.Message)}, "", "")
	}
	if !known {
		h.release(agent)
		res := sink.Result{Code: ef.EFUnknownTool, Message: "Name the server the tool belongs to; this gate does not protect that one."}
		return refusedDecision(res, vendor, cand.VendorID)
	}
	c := sink.Call{Session: session, Agent: agent, Server: server, Destination: dest, Tool: cand.Act.Tool.ToolID,
		Args: cand.Arguments, Provenance: r.Provenance, Vendor: vendor, VendorID: cand.VendorID}

	allow := make(chan allowed, 1)
	done := make(chan sink.Result, 1)
	h.running.Add(1)
	go func() {
		defer h.running.Done()
		defer h.release(agent)
		// Once the call is under way it finishes (or fails closed) whatever the client does,
		// as the MCP proxy detaches the gate.
		var hd *hostDispatch
		res, _ := cfg.Gate.Handle(context.WithoutCancel(ctx), c, h.invoker(agent, allow, &hd))
		if hd != nil {
			hd.recorded <- res.State // the outcome, its receipt and its report are done
		}
		done <- res
	}()
	select {
	case a := <-allow:
		if a.inv.Journaled {
			return journaledAllow(a.inv, h.actOf(a.inv.OperationID))
		}
		// On the hot path the act id and the audit code are known once Handle answers: at once.
		return hotPathAllow(<-done)
	case res := <-done:
		// On the hot path the Invoker's allow and Handle's result are both ready once Handle
		// returns, and select picks either: an allow sent on the hot path is the decision. (A
		// journaled dispatch whose Handle already returned was ended without the host's outcome:
		// no allow then.)
		select {
		case a := <-allow:
			if !a.inv.Journaled {
				return hotPathAllow(res)
			}
		default:
		}
		if res.Replayed {
			// A retry of a dispatch already settled in this session: not to be run again; the
			// recorded result is the tool's result (tool-use-binding §9).
			return replayedDecision(res)
		}
		return refusedDecision(res, vendor, cand.VendorID)
	}
}
