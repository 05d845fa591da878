package sidecar

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/actgate/actgate/internal/review"
	"github.com/actgate/actgate/internal/sink"
)

// recordedPins is what a policy source knows of the governing ToolPolicy's status.toolPins
// (*policysource.Source).
type recordedPins interface {
	RecordedPin(server, tool string) (sink.PinRecord, bool)
}

// maxLocalPins bounds the first uses the sidecar remembers before its policy's status shows
// them.
const maxLocalPins = 1024

// servicePins is the pod's sink.PinStore (docs/architecture.md "Pinned tool definitions"):
// recorded and accepted digests are the governing ToolPolicy's status.toolPins, which the
// sidecar receives with its policy; a first use and a change are reported to the authority
// service, which writes them into that status (the sidecar has no API rights of its own). A
// first use the service recorded is also held here until the policy's status shows it.
type servicePins struct {
	client  *review.Client
	source  recordedPins // nil: nothing recorded is known
	timeout time.Duration

	mu    sync.Mutex
	local map[[2]string]sink.PinRecord
}

var (
	_ sink.PinStore       = (*servicePins)(nil)
	_ sink.ChangeRecorder = (*servicePins)(nil)
)

// errNoPinSource refuses a first use when the policy source cannot tell what is recorded.
var errNoPinSource = errors.New("sidecar: the policy source holds no tool pins")

func (p *servicePins) Pinned(_ context.Context, server, tool string) (sink.PinRecord, bool, error) {
	if p.source != nil {
		if r, ok := p.source.RecordedPin(server, tool); ok {
			return r, true, nil
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.local[[2]string{server, tool}]
	return r, ok, nil
}

// RecordFirstUse asks the service to record r; the pin the service holds then (another
// sidecar's first use, maybe) is the answer. Without an answer nothing is recorded and the
// gate hides and refuses the tool (fail closed) until a later list succeeds.
func (p *servicePins) RecordFirstUse(ctx context.Context, r sink.PinRecord) (sink.PinRecord, error) {
	if p.source == nil {
		return sink.PinRecord{}, errNoPinSource
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	pin, err := p.client.ReportToolPin(ctx, review.ToolPinReport{Server: r.Server, Tool: r.Tool, SHA256: r.Digest, Members: r.Members})
	if err != nil {
		return sink.PinRecord{}, err
	}
	out := sink.PinRecord{Server: pin.Server, Tool: pin.Tool, Digest: pin.SHA256, Members: pin.Members, AcceptedBy: pin.AcceptedBy, AcceptedAt: pin.AcceptedAt.Time}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.local == nil {
		p.local = map[[2]string]sink.PinRecord{}
	}
	if len(p.local) < maxLocalPins {
		p.local[[2]string{r.Server, r.Tool}] = out
	}
	return out, nil
}

// RecordChange reports a changed definition: the service records it in status.toolChanges and
// creates the ToolDefinitionChanged Event.
func (p *servicePins) RecordChange(ctx context.Context, r sink.PinRecord) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	_, err := p.client.ReportToolPin(ctx, review.ToolPinReport{Server: r.Server, Tool: r.Tool, SHA256: r.Digest, Members: r.Members, Changed: true})
	return err
}

// NewPinStore is the pod's sink.PinStore over the authority service's client and the policy
// source (which must offer RecordedPin, as *policysource.Source does): what NewGate wires.
func NewPinStore(client *review.Client, source sink.PolicyEvaluator, timeout time.Duration) sink.PinStore {
	p := &servicePins{client: client, timeout: timeout}
	if rp, ok := source.(recordedPins); ok {
		p.source = rp
	}
	return p
}
