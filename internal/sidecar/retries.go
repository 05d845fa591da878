package sidecar

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/actgate/actgate/internal/journal"
)

// retries answers a retry of a dispatch that already reached EXECUTED or FAILED with its
// recorded result instead of a second invocation, as internal/sink does for the embedded gate
// (docs/architecture.md "Retries"; tool-use-binding §9: "a fetch of the original tool_result, never
// a second invoke"). A retry is a call of the same action (action digest) at the same destination
// in the same session while the authority consumed for the dispatch is unexpired. The authority
// service issues a fresh authority for every new act, so without this index a repeated permitted
// call would run twice.
//
// Sessions are checked through the act id, which is a MAC over its session
// (act.IDIssuer.CheckSession). The index is process-local and starts empty: MCP sessions do
// not outlive the process, and what a previous process left in flight is refused by unsettled
// until reconciled. After the window, or in another session, an identical call is a new act
// with its own authority (§23: "a new Candidate Act. That is expected").
type retries struct {
	mu      sync.Mutex
	m       map[actionKey][]settledDispatch
	sweepAt int
}

// settledDispatch is one dispatch with an authoritative outcome.
type settledDispatch struct {
	actID, operationID, authorityID string
	state                           journal.State
	result                          json.RawMessage
	expires                         time.Time // the consumed authority's expiry: the retry window
}

const minRetrySweep = 1024

func newRetries() *retries {
	return &retries{m: map[actionKey][]settledDispatch{}, sweepAt: minRetrySweep}
}

// add records a settled dispatch of k.
func (r *retries) add(k actionKey, d settledDispatch, now time.Time) {
	if !d.state.Terminal() || !now.Before(d.expires) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.m) >= r.sweepAt {
		for key, ds := range r.m {
			live := ds[:0]
			for _, x := range ds {
				if now.Before(x.expires) {
					live = append(live, x)
				}
			}
			if len(live) == 0 {
				delete(r.m, key)
			} else {
				r.m[key] = live
			}
		}
		r.sweepAt = max(minRetrySweep, 2*len(r.m))
	}
	r.m[k] = append(r.m[k], d)
}

// lookup returns the newest unexpired settled dispatch of k whose act belongs to the session
// (owned reports that).
func (r *retries) lookup(k actionKey, now time.Time, owned func(actID string) bool) (settledDispatch, bool) {
	r.mu.Lock()
	ds := append([]settledDispatch(nil), r.m[k]...)
	r.mu.Unlock()
	for i := len(ds) - 1; i >= 0; i-- {
		if now.Before(ds[i].expires) && owned(ds[i].actID) {
			return ds[i], true
		}
	}
	return settledDispatch{}, false
}
