package standalone

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/sink"
)

// The local moments API of `actgate serve` (embedded mode). Every request carries
// "Authorization: Bearer <token>" with a principal's token from DataDir/principals/NAME.token;
// the token decides who the caller is, so only a user who can read that file resolves as that
// principal. The web console (`actgate console`) speaks the same API.
//
//	GET  /v1/moments[?all=1]        moments addressed to the caller (pending only, unless all)
//	GET  /v1/moments/{id}           one moment
//	POST /v1/moments/{id}/resolve   body: an envelope-04 §7.3 resolution
const (
	APIMoments = "/v1/moments"
	// maxResolutionBytes bounds a resolution body.
	maxResolutionBytes = 64 << 10
)

// MomentJSON is a binding moment on the API.
type MomentJSON struct {
	ID             string          `json:"id"`
	Session        string          `json:"session"`
	Agent          string          `json:"agent"`
	Server         string          `json:"server,omitempty"`
	Tool           string          `json:"tool,omitempty"`
	ActID          string          `json:"actId,omitempty"`
	Envelope       json.RawMessage `json:"envelope"`
	EnvelopeDigest string          `json:"envelopeDigest"`
	Principals     []string        `json:"principals"`
	Created        time.Time       `json:"created"`
	Expires        time.Time       `json:"expires"`
	Resolved       bool            `json:"resolved"`
	Resolution     string          `json:"resolution,omitempty"`
	// Class and ActionDigest describe the call the moment decides (the escalated call, or the
	// first option that needs a human); empty when no option does.
	Class        string `json:"class,omitempty"`
	ActionDigest string `json:"actionDigest,omitempty"`
	// GateAuthored says the gate wrote the envelope from policy; false: the agent proposed it,
	// and every slot of it is the agent's words.
	GateAuthored bool `json:"gateAuthored"`
	// Calls are the calls the options authorise, one per option in order, as the gate computed
	// their action digests from them (arguments masked where policy says). They are the gate's
	// record, not the agent's text: surfaces show them under "Runs (verified by actgate)".
	Calls []envelope.Call `json:"calls"`
}

// ResolveJSON is the answer to a resolution.
type ResolveJSON struct {
	MomentID    string `json:"momentId"`
	Kind        string `json:"kind"`
	Option      string `json:"option,omitempty"`
	AuthorityID string `json:"authorityId,omitempty"`
	Pending     bool   `json:"pending"`
	Votes       int    `json:"votes,omitempty"`
	Required    int    `json:"required,omitempty"`
}

// APIError is every error body of the API.
type APIError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// API error codes.
const (
	CodeUnauthenticated = "UNAUTHENTICATED"
	CodeNotFound        = "MOMENT_NOT_FOUND"
	CodeExpired         = "MOMENT_EXPIRED"
	CodeResolved        = "MOMENT_RESOLVED"
	CodeNotPrincipal    = "NOT_A_PRINCIPAL"
	CodeInvalid         = "RESOLUTION_INVALID"
	CodeUnavailable     = "GATE_UNAVAILABLE"
)

// momentsAPI serves the moments API of one gate.
type momentsAPI struct {
	gate   *sink.Gate
	tokens map[string][]byte // principal → token
	log    logr.Logger
}

func (a *momentsAPI) register(mux *http.ServeMux) {
	mux.HandleFunc("GET "+APIMoments, a.list)
	mux.HandleFunc("GET "+APIMoments+"/{id}", a.get)
	mux.HandleFunc("POST "+APIMoments+"/{id}/resolve", a.resolve)
}

// principal authenticates the caller by token (constant-time comparison against each).
func (a *momentsAPI) principal(w http.ResponseWriter, r *http.Request) (string, bool) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if ok {
		for name, want := range a.tokens {
			if subtle.ConstantTimeCompare([]byte(tok), want) == 1 {
				return name, true
			}
		}
	}
	writeAPIError(w, http.StatusUnauthorized, CodeUnauthenticated, "a principal's token is required (DataDir/principals/NAME.token)")
	return "", false
}

func (a *momentsAPI) list(w http.ResponseWriter, r *http.Request) {
	who, ok := a.principal(w, r)
	if !ok {
		return
	}
	ms, err := a.gate.Moments(r.Context(), sink.MomentFilter{Pending: r.URL.Query().Get("all") == ""})
	if err != nil {
		a.log.Error(err, "Listing moments failed")
		writeAPIError(w, http.StatusServiceUnavailable, CodeUnavailable, "moments could not be listed")
		return
	}
	out := struct {
		Moments []MomentJSON `json:"moments"`
	}{Moments: []MomentJSON{}}
	for _, m := range ms {
		if slices.Contains(m.Principals, who) {
			out.Moments = append(out.Moments, toMomentJSON(m))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *momentsAPI) get(w http.ResponseWriter, r *http.Request) {
	who, ok := a.principal(w, r)
	if !ok {
		return
	}
	m, found, err := a.find(r.Context(), r.PathValue("id"))
	switch {
	case err != nil:
		a.log.Error(err, "Listing moments failed")
		writeAPIError(w, http.StatusServiceUnavailable, CodeUnavailable, "moments could not be listed")
	case !found || !slices.Contains(m.Principals, who):
		writeAPIError(w, http.StatusNotFound, CodeNotFound, "no such binding moment for this principal")
	default:
		writeJSON(w, http.StatusOK, toMomentJSON(m))
	}
}

func (a *momentsAPI) find(ctx context.Context, id string) (sink.Moment, bool, error) {
	ms, err := a.gate.Moments(ctx, sink.MomentFilter{})
	if err != nil {
		return sink.Moment{}, false, err
	}
	for _, m := range ms {
		if m.ID == id {
			return m, true, nil
		}
	}
	return sink.Moment{}, false, nil
}

func (a *momentsAPI) resolve(w http.ResponseWriter, r *http.Request) {
	who, ok := a.principal(w, r)
	if !ok {
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxResolutionBytes+1))
	if err != nil || len(body) > maxResolutionBytes {
		writeAPIError(w, http.StatusBadRequest, CodeInvalid, "unreadable or oversized resolution")
		return
	}
	id := r.PathValue("id")
	res, err := a.gate.Resolve(r.Context(), id, who, body)
	if err != nil {
		status, code := http.StatusBadRequest, CodeInvalid
		switch {
		case errors.Is(err, sink.ErrMomentNotFound):
			status, code = http.StatusNotFound, CodeNotFound
		case errors.Is(err, sink.ErrMomentExpired):
			status, code = http.StatusGone, CodeExpired
		case errors.Is(err, sink.ErrMomentResolved):
			status, code = http.StatusConflict, CodeResolved
		case errors.Is(err, sink.ErrNotPrincipal), errors.Is(err, sink.ErrSelfResolution):
			status, code = http.StatusForbidden, CodeNotPrincipal
		case errors.Is(err, sink.ErrResolutionInvalid):
		default:
			status, code = http.StatusServiceUnavailable, CodeUnavailable
		}
		a.log.Info("Resolution refused", "moment", id, "principal", who, "code", code)
		writeAPIError(w, status, code, err.Error())
		return
	}
	a.log.Info("Binding moment resolved", "moment", id, "principal", who, "kind", res.Kind, "pending", res.Pending)
	writeJSON(w, http.StatusOK, ResolveJSON{MomentID: res.MomentID, Kind: res.Kind, Option: res.OptionID,
		AuthorityID: res.AuthorityID, Pending: res.Pending, Votes: res.Votes, Required: res.Required})
}

func toMomentJSON(m sink.Moment) MomentJSON {
	out := MomentJSON{ID: m.ID, Session: m.Session, Agent: m.Agent, Server: m.Server, Tool: m.Tool, ActID: m.ActID,
		EnvelopeDigest: m.Digest, Principals: m.Principals, Created: m.Created.UTC(), Expires: m.Expires.UTC(),
		Resolved: m.Resolved, Resolution: m.Resolution, Class: m.Class, ActionDigest: m.ActionDigest,
		GateAuthored: m.GateAuthored, Calls: m.Calls}
	if out.Calls == nil {
		out.Calls = []envelope.Call{}
	}
	if m.Envelope != nil {
		out.Envelope = m.Envelope.Canonical()
	}
	return out
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeAPIError(w http.ResponseWriter, status int, code, msg string) {
	var e APIError
	e.Error.Code, e.Error.Message = code, msg
	writeJSON(w, status, e)
}
