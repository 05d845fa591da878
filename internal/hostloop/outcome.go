package hostloop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/sink"
)

// actOf is the act id of a journaled dispatch ("" if it cannot be read).
func (h *Loop) actOf(operationID string) string {
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.RecordTimeout)
	defer cancel()
	rec, err := h.cfg.Records.Record(ctx, operationID)
	if err != nil {
		return ""
	}
	return rec.ActID
}

// invoker is the Invoker of a host-loop call: it tells Enforce the call may run and, for a
// journaled dispatch, waits for the host's outcome.
func (h *Loop) invoker(agent string, allow chan<- allowed, registered **hostDispatch) sink.Invoker {
	return func(ctx context.Context, operationID string) (sink.InvokeResult, error) {
		inv, _ := sink.InvocationFrom(ctx)
		inv.OperationID = operationID
		if !inv.Journaled {
			allow <- allowed{inv: inv}
			return sink.InvokeResult{Outcome: sink.OutcomeExecuted}, nil
		}
		hd := &hostDispatch{agent: agent, report: make(chan hostReport, 1), recorded: make(chan journal.State, 1)}
		*registered = hd
		h.mu.Lock()
		h.waiting[operationID] = hd
		h.mu.Unlock()
		allow <- allowed{inv: inv}
		t := time.NewTimer(h.cfg.Timeout)
		defer t.Stop()
		select {
		case rep := <-hd.report:
			switch rep.outcome {
			case HostExecuted:
				return sink.InvokeResult{Result: rep.result, Outcome: sink.OutcomeExecuted}, nil
			case HostFailed:
				return sink.InvokeResult{Result: rep.result, Outcome: sink.OutcomeFailed}, nil
			}
			return sink.InvokeResult{Result: rep.result, Outcome: sink.OutcomeIndeterminate}, nil
		case <-h.closing:
			h.mu.Lock()
			delete(h.waiting, operationID)
			h.mu.Unlock()
			h.cfg.Log.Info("Gate stopping before the host loop reported the outcome; INDETERMINATE", "operation", operationID)
			return sink.InvokeResult{Outcome: sink.OutcomeIndeterminate}, nil
		case <-t.C:
			h.mu.Lock()
			delete(h.waiting, operationID)
			h.mu.Unlock()
			h.cfg.Log.Info("Host loop did not report the outcome in time; INDETERMINATE", "operation", operationID)
			return sink.InvokeResult{Outcome: sink.OutcomeIndeterminate}, nil
		}
	}
}

func (h *Loop) complete(ctx context.Context, agent, operationID string, outcome HostOutcome, result []byte) (journal.DispatchRecord, error) {
	switch outcome {
	case HostExecuted, HostFailed, HostIndeterminate:
	default:
		return journal.DispatchRecord{}, fmt.Errorf("hostloop: outcome %q is not executed, failed or indeterminate", clip(string(outcome)))
	}
	h.mu.Lock()
	hd, ok := h.waiting[operationID]
	if ok && hd.agent != agent {
		// Another agent's dispatch under way: as unknown to this one as one never issued.
		h.mu.Unlock()
		return journal.DispatchRecord{}, fmt.Errorf("%w: %s", ErrUnknownOperation, clip(operationID))
	}
	delete(h.waiting, operationID)
	h.mu.Unlock()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.cfg.RecordTimeout)
	defer cancel()
	if !ok {
		rec, err := h.cfg.Records.Record(rctx, operationID)
		switch {
		case errors.Is(err, journal.ErrNotFound):
			return journal.DispatchRecord{}, fmt.Errorf("%w: %s", ErrUnknownOperation, clip(operationID))
		case err != nil:
			return journal.DispatchRecord{}, err
		}
		return rec, fmt.Errorf("%w: %s is %s", ErrSettled, operationID, rec.State)
	}
	hd.report <- hostReport{outcome: outcome, result: append(json.RawMessage(nil), result...)}
	h.cfg.Log.Info("Dispatch outcome reported by the host loop", "operation", operationID, "outcome", string(outcome))
	// The sink records the outcome when the Invoker returns; read what it recorded.
	select {
	case <-hd.recorded:
	case <-rctx.Done():
		return journal.DispatchRecord{}, fmt.Errorf("hostloop: the outcome of %s was not recorded in time: %w", operationID, rctx.Err())
	}
	return h.cfg.Records.Record(rctx, operationID)
}

// Close ends the host loops' dispatches still awaiting their outcome (INDETERMINATE: the host
// may have run the tool) and waits, at most a record timeout, for their records.
func (h *Loop) Close() {
	h.closeOnce.Do(func() { close(h.closing) })
	done := make(chan struct{})
	go func() {
		h.running.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(h.cfg.RecordTimeout):
	}
}
