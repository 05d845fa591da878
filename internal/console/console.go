package console

import (
	"context"
	"errors"
	"time"

	"github.com/actgate/actgate/internal/envelope"
)

// Moment is one binding moment as the console shows it. Envelope is nil exactly when the
// stored envelope was discarded as malformed; Problems then says why and Payload is the
// conventional payload shown in its place (envelope-04 §9.3).
type Moment struct {
	// ID names the moment to its Backend (a gate moment id, or a BindingMoment's name).
	ID string
	// Ref is the moment's name in announcements (internal/notify links to the console with
	// "#moment-REF"; in Kubernetes "namespace/name"). Empty: ID.
	Ref string
	// Principal is who the moment is addressed to.
	Principal string
	// Agent is the initiating agent, when known.
	Agent string
	// Expires is when the moment stops being resolvable; zero when unknown.
	Expires time.Time
	// Act is the call the moment decides, from the gate's or the API server's own record,
	// never from the envelope.
	Act Act
	// Envelope is the validated envelope; nil when it was discarded.
	Envelope *envelope.Envelope
	// Calls are the calls the envelope's options authorise, one per option in order, from the
	// gate's or the API server's own record (never from the envelope): the page shows each
	// under "Runs (verified by actgate)" beside the option's label. An envelope without them,
	// or with calls that are not the options' (envelope.CheckCalls), is shown as discarded.
	Calls []envelope.Call
	// AgentAuthored says the agent wrote the envelope, so its slots are shown as the agent's
	// words; false: the gate wrote it from policy.
	AgentAuthored bool
	// Problems lists why the envelope was discarded.
	Problems []envelope.Problem
	// Payload is the conventional payload shown instead of a discarded envelope.
	Payload string
}

// Act is what the console shows of the call a moment decides. An empty field is shown as
// unknown; Unavailable, when set, says why the act could not be read at all.
type Act struct {
	// Name is the act's name or id.
	Name string
	// Tool and Server name the call; Class is its consequence class; ActionDigest is the
	// digest of {"tool", "args"} the agent asked for.
	Tool, Server, Class, ActionDigest string
	// Unavailable says why the act's facts are missing ("" when they are not).
	Unavailable string
}

// Result is what a Backend reports for a resolution it wrote.
type Result struct {
	// Kind is the resolution written.
	Kind envelope.Kind
	// Message says, in one line, what the resolution did (e.g. the authority issued). It is
	// shown to the principal as text.
	Message string
}

// Backend lists the moments addressed to the console's principal and writes resolutions as
// that principal.
type Backend interface {
	// List returns the moments pending for the principal, oldest first.
	List(ctx context.Context) ([]Moment, error)
	// Resolve writes resolution (envelope-04 §7.3 JSON, wrapped in
	// binding_moment_resolution) for moment id. A refusal (admission, the gate's checks, a
	// conflicting write) wraps ErrRefused and nothing was written; any other error leaves the
	// outcome unknown.
	Resolve(ctx context.Context, id string, resolution []byte) (Result, error)
}

// ErrRefused marks a resolution the backend (or the API behind it) refused: nothing was
// written, and the error's message says why in the refuser's words.
var ErrRefused = errors.New("the resolution was refused")
