package sink

import (
	"encoding/json"

	"github.com/actgate/actgate/internal/sink/moment"
)

// The request_binding_moment tool's input and its parsing live in internal/sink/moment; these
// names keep the gate's API in one place.

// MaxProposalBytes bounds the arguments of one request_binding_moment call.
const MaxProposalBytes = moment.MaxProposalBytes

// Hatch names an escape hatch in Proposal.Hatches (envelope-04 §5.8).
const (
	HatchFreeText = moment.HatchFreeText
	HatchDialogue = moment.HatchDialogue
)

// ErrProposal is wrapped by every refusal of ParseProposal.
var ErrProposal = moment.ErrProposal

// Option is one proposed option of a binding moment: a concrete tool call.
type Option = moment.ProposalOption

// Proposal is the input of the virtual request_binding_moment tool. The gate computes every
// action digest itself; the agent never supplies one.
type Proposal = moment.Proposal

// ParseProposal reads the arguments of a request_binding_moment call from untrusted bytes
// (moment.ParseProposal).
func ParseProposal(raw []byte) (Proposal, error) { return moment.ParseProposal(raw) }

// ProposalSchema is the inputSchema of the virtual request_binding_moment tool.
func ProposalSchema() json.RawMessage { return moment.ProposalSchema() }
