package moment

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/jcs"
)

// ProposalOption is one proposed option of a binding moment: a concrete tool call.
type ProposalOption struct {
	Label     string          `json:"label"`
	Tool      string          `json:"tool"`
	Server    string          `json:"server,omitempty"`
	Args      json.RawMessage `json:"args"`
	Reasoning string          `json:"reasoning,omitempty"`
}

// Proposal is the input of the virtual request_binding_moment tool. The gate computes every
// action digest itself; the agent never supplies one.
type Proposal struct {
	Synopsis        string           `json:"synopsis"`
	Findings        []string         `json:"findings,omitempty"`
	Recommendations []string         `json:"recommendations,omitempty"`
	Offer           string           `json:"offer,omitempty"`
	Stem            string           `json:"stem"`
	Options         []ProposalOption `json:"options"`
	Recommended     int              `json:"recommended"`
	Hatches         []string         `json:"hatches,omitempty"`
	// DecisionClass and CalibrationNote are the envelope's optional meta slot (envelope-04
	// §5.9), authored by the agent; empty means absent.
	DecisionClass   string          `json:"decision_class,omitempty"`
	CalibrationNote string          `json:"calibration_note,omitempty"`
	Raw             json.RawMessage `json:"-"`
}

// MaxProposalBytes bounds the arguments of one request_binding_moment call.
const MaxProposalBytes = 256 << 10

// Hatch names an escape hatch in Proposal.Hatches (envelope-04 §5.8).
const (
	HatchFreeText = "free_text"
	HatchDialogue = "dialogue"
)

// ErrProposal is wrapped by every refusal of ParseProposal.
var ErrProposal = errors.New("sink: invalid binding-moment proposal")

// ParseProposal reads the arguments of a request_binding_moment call from untrusted bytes. The
// bytes pass the strict JCS profile first (envelope-04 §6.3: duplicate member names, unpaired
// surrogates, non-integer numbers and deep nesting are refused on the raw bytes, so the gate
// and the tool agree on what was proposed); then exactly the members of ProposalSchema are
// accepted. It does not decide whether the proposal is a good envelope: RequestMoment does.
func ParseProposal(raw []byte) (Proposal, error) {
	if len(raw) > MaxProposalBytes {
		return Proposal{}, fmt.Errorf("%w: %d bytes exceeds %d", ErrProposal, len(raw), MaxProposalBytes)
	}
	canon, err := jcs.Canonicalize(raw, jcs.Strict)
	if err != nil {
		return Proposal{}, fmt.Errorf("%w: %v", ErrProposal, err)
	}
	if canon[0] != '{' {
		return Proposal{}, fmt.Errorf("%w: not a JSON object", ErrProposal)
	}
	var w struct {
		Synopsis        *string   `json:"synopsis"`
		Findings        []string  `json:"findings"`
		Recommendations []string  `json:"recommendations"`
		Offer           *string   `json:"offer"`
		Stem            *string   `json:"stem"`
		Options         []wireOpt `json:"options"`
		Recommended     *int64    `json:"recommended"`
		Hatches         []string  `json:"hatches"`
		Meta            *struct {
			DecisionClass   *string `json:"decision_class"`
			CalibrationNote *string `json:"calibration_note"`
		} `json:"meta"`
	}
	dec := json.NewDecoder(bytes.NewReader(canon))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return Proposal{}, fmt.Errorf("%w: %v", ErrProposal, err)
	}
	switch {
	case w.Synopsis == nil:
		return Proposal{}, fmt.Errorf("%w: synopsis is required", ErrProposal)
	case w.Stem == nil:
		return Proposal{}, fmt.Errorf("%w: stem is required", ErrProposal)
	case w.Options == nil:
		return Proposal{}, fmt.Errorf("%w: options are required", ErrProposal)
	case w.Recommended == nil:
		return Proposal{}, fmt.Errorf("%w: recommended is required (envelope-04 §5.7)", ErrProposal)
	case *w.Recommended < 0 || *w.Recommended >= int64(len(w.Options)):
		return Proposal{}, fmt.Errorf("%w: recommended must index an option (envelope-04 §5.7)", ErrProposal)
	}
	p := Proposal{
		Synopsis:        *w.Synopsis,
		Findings:        w.Findings,
		Recommendations: w.Recommendations,
		Stem:            *w.Stem,
		Recommended:     int(*w.Recommended),
		Hatches:         w.Hatches,
		Raw:             json.RawMessage(canon),
	}
	if w.Offer != nil {
		p.Offer = *w.Offer
	}
	if w.Meta != nil {
		// An empty member is refused by the envelope (a present but empty member and an absent
		// one must not be confused, envelope.Meta); an empty meta object means no meta.
		if w.Meta.DecisionClass != nil {
			if *w.Meta.DecisionClass == "" {
				return Proposal{}, fmt.Errorf("%w: meta.decision_class is empty; omit it instead", ErrProposal)
			}
			p.DecisionClass = *w.Meta.DecisionClass
		}
		if w.Meta.CalibrationNote != nil {
			if *w.Meta.CalibrationNote == "" {
				return Proposal{}, fmt.Errorf("%w: meta.calibration_note is empty; omit it instead", ErrProposal)
			}
			p.CalibrationNote = *w.Meta.CalibrationNote
		}
	}
	for i, o := range w.Options {
		if o.Tool == nil || o.Args == nil || o.Label == nil {
			return Proposal{}, fmt.Errorf("%w: options[%d] needs label, tool and args", ErrProposal, i)
		}
		if len(o.Args) == 0 || o.Args[0] != '{' {
			return Proposal{}, fmt.Errorf("%w: options[%d].args must be an object", ErrProposal, i)
		}
		opt := ProposalOption{Label: *o.Label, Tool: *o.Tool, Args: o.Args}
		if o.Server != nil {
			opt.Server = *o.Server
		}
		if o.Reasoning != nil {
			opt.Reasoning = *o.Reasoning
		}
		p.Options = append(p.Options, opt)
	}
	if err := CheckHatches(p.Hatches); err != nil {
		return Proposal{}, err
	}
	return p, nil
}

type wireOpt struct {
	Label     *string         `json:"label"`
	Reasoning *string         `json:"reasoning"`
	Tool      *string         `json:"tool"`
	Server    *string         `json:"server"`
	Args      json.RawMessage `json:"args"`
}

// CheckHatches refuses a hatch other than HatchFreeText and HatchDialogue, or one listed twice
// (ErrProposal).
func CheckHatches(h []string) error {
	seen := map[string]bool{}
	for _, s := range h {
		if s != HatchFreeText && s != HatchDialogue {
			return fmt.Errorf("%w: unknown hatch %q (free_text, dialogue)", ErrProposal, clip(s, 32))
		}
		if seen[s] {
			return fmt.Errorf("%w: hatch %s listed twice", ErrProposal, s)
		}
		seen[s] = true
	}
	return nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// ProposalSchema is the inputSchema of the virtual request_binding_moment tool.
func ProposalSchema() json.RawMessage {
	return json.RawMessage(proposalSchema)
}

const proposalSchema = `{
  "type": "object",
  "description": "Ask a human principal to decide between 2 to 4 concrete tool calls (a binding moment, envelope-04). The gate computes each option's action digest itself; the chosen option's call, made afterwards in this session with exactly these arguments, runs once.",
  "additionalProperties": false,
  "required": ["synopsis", "findings", "recommendations", "stem", "options", "recommended"],
  "properties": {
    "synopsis": {"type": "string", "description": "One sentence stating your position, answer first (envelope-04 §5.1)."},
    "findings": {"type": "array", "maxItems": 16, "items": {"type": "string"}, "description": "Terse observations the synopsis rests on (§5.2)."},
    "recommendations": {"type": "array", "maxItems": 16, "items": {"type": "string"}, "description": "Concrete moves (§5.3)."},
    "offer": {"type": "string", "description": "Offer of elaboration on demand (§5.4); default \"Ask for detail on any item.\""},
    "stem": {"type": "string", "description": "One neutral sentence posing the decision; no recommendation in it (§5.5)."},
    "options": {
      "type": "array", "minItems": 2, "maxItems": 4,
      "items": {
        "type": "object",
        "additionalProperties": false,
        "required": ["label", "reasoning", "tool", "args"],
        "properties": {
          "label": {"type": "string", "description": "Short, action-shaped statement of the option (§5.6)."},
          "reasoning": {"type": "string", "description": "One line on why the principal might choose it."},
          "tool": {"type": "string", "description": "The tool this option calls."},
          "server": {"type": "string", "description": "The protected server of the tool; required when more than one server is protected."},
          "args": {"type": "object", "description": "The exact arguments of the call; integers only, no fractions."}
        }
      }
    },
    "recommended": {"type": "integer", "minimum": 0, "maximum": 3, "description": "Zero-based index of the option you recommend (§5.7)."},
    "hatches": {"type": "array", "items": {"enum": ["free_text", "dialogue"]}, "uniqueItems": true, "description": "Escape hatches left open; omit to leave both open (§5.8)."},
    "meta": {
      "type": "object", "additionalProperties": false,
      "description": "Optional (§5.9).",
      "properties": {
        "decision_class": {"type": "string", "minLength": 1, "description": "The category of the decision (e.g. consent, permission-delta, recompute)."},
        "calibration_note": {"type": "string", "minLength": 1, "description": "A short correcting preface, ONLY when your earlier framing in this session now reads as materially understating what you have since concluded. Not ritual: its rate is monitored (§5.9)."}
      }
    }
  }
}`

// ProposalMeta is the envelope's meta slot from a proposal, or nil when it has none.
func ProposalMeta(p Proposal) *envelope.Meta {
	if p.DecisionClass == "" && p.CalibrationNote == "" {
		return nil
	}
	return &envelope.Meta{DecisionClass: p.DecisionClass, CalibrationNote: p.CalibrationNote}
}
