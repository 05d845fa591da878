package sink

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/actgate/actgate/internal/act"
)

// errNotReady is returned until the gate is wired; every path fails closed.
var errNotReady = errors.New("sink: gate not implemented yet")

type gate struct{}

func (g *gate) handle(context.Context, Call, Invoker) (Result, error) { return Result{}, errNotReady }
func (g *gate) enforce(context.Context, *act.AgentCandidateAct, json.RawMessage) (Decision, error) {
	return Decision{}, errNotReady
}
func (g *gate) requestMoment(context.Context, string, string, Proposal) (Result, error) {
	return Result{}, errNotReady
}
func (g *gate) resolve(context.Context, string, string, []byte) (ResolveResult, error) {
	return ResolveResult{}, errNotReady
}
func (g *gate) moments(context.Context, MomentFilter) ([]Moment, error) { return nil, errNotReady }
func (g *gate) canEscalate(string, string) bool                         { return false }

// ProposalSchema is the inputSchema of the virtual request_binding_moment tool.
func ProposalSchema() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
