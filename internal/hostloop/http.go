package hostloop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"

	"github.com/actgate/actgate/internal/mcpproxy"
)

// Authenticator names the agent behind a host-loop request, or reports that it carries no
// agent's credential.
type Authenticator func(r *http.Request) (agent string, ok bool)

// FixedAgent is the Authenticator of a listener only its agent reaches: the pod's sidecar on
// loopback, whose host loop calls as the pod's service-account user.
func FixedAgent(agent string) Authenticator {
	return func(*http.Request) (string, bool) { return agent, true }
}

// accept authenticates r, reads its body and parses it with parse; it answers a refusal itself
// (401, 405, 413, 415 or 400) and then reports !ok.
func accept[T any](w http.ResponseWriter, r *http.Request, auth Authenticator, parse func([]byte) (T, error)) (agent string, req T, ok bool) {
	if agent, ok = authenticate(w, r, auth); !ok {
		return "", req, false
	}
	body, ok := readBody(w, r)
	if !ok {
		return "", req, false
	}
	req, err := parse(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, err)
		return "", req, false
	}
	return agent, req, true
}

// Handler serves POST /v1/enforce and POST /v1/complete, each call made as the agent auth
// names; a request auth refuses is answered 401 HOSTLOOP_UNAUTHENTICATED before its body is
// read, and nothing is enforced.
func (h *Loop) Handler(auth Authenticator) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(EnforcePath, func(w http.ResponseWriter, r *http.Request) {
		agent, req, ok := accept(w, r, auth, ParseEnforceRequest)
		if !ok {
			return
		}
		// The host waits for the answer; once the consume is under way it must finish (or
		// fail closed) whatever the client does, as the MCP proxy detaches the gate.
		d, err := h.Enforce(context.WithoutCancel(r.Context()), agent, req)
		if err != nil {
			h.cfg.Log.Info("Host-loop call refused at the bound of calls under way", "agent", agent)
			writeError(w, http.StatusTooManyRequests, CodePendingLimit, err)
			return
		}
		if d.RetryAfter > 0 {
			// The decision is still the answer (200): the header only says when to ask again.
			w.Header().Set("Retry-After", strconv.FormatInt(d.RetryAfter, 10))
		}
		writeJSON(w, http.StatusOK, d)
	})
	mux.HandleFunc(CompletePath, func(w http.ResponseWriter, r *http.Request) {
		agent, req, ok := accept(w, r, auth, ParseCompleteRequest)
		if !ok {
			return
		}
		rec, err := h.Complete(r.Context(), agent, req.OperationID, req.Outcome, req.Result)
		switch {
		case errors.Is(err, ErrUnknownOperation):
			writeError(w, http.StatusNotFound, CodeUnknownOperation, err)
		case errors.Is(err, ErrSettled):
			writeError(w, http.StatusConflict, CodeSettled, err)
		case err != nil:
			h.cfg.Log.Error(err, "Host-loop outcome not recorded", "operation", req.OperationID)
			writeError(w, http.StatusServiceUnavailable, CodeUnavailable, errors.New("the outcome could not be recorded"))
		default:
			writeJSON(w, http.StatusOK, CompleteResponse{OperationID: rec.OperationID, State: rec.State})
		}
	})
	return mux
}

// authenticate answers 403 for a request from a page of another site (the MCP proxy's DNS
// rebinding test, mcpproxy.RebindingHeader: without it a page could reach a loopback gate that
// needs no token, as the sidecar's) and 401 for a request auth refuses.
func authenticate(w http.ResponseWriter, r *http.Request, auth Authenticator) (string, bool) {
	if what := mcpproxy.RebindingHeader(r); what != "" {
		writeError(w, http.StatusForbidden, CodeHostRefused,
			fmt.Errorf("the %s header does not name the gate's loopback address (DNS rebinding protection)", what))
		return "", false
	}
	if auth != nil {
		if agent, ok := auth(r); ok && agent != "" {
			return agent, true
		}
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="actgate"`)
	writeError(w, http.StatusUnauthorized, CodeUnauthenticated, errors.New("this endpoint needs the agent's token in Authorization: Bearer (see the gate's agent.tokenFile)"))
	return "", false
}

// readBody checks method and media type and reads a bounded body; it answers the refusal
// itself.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, CodeBadRequest, errors.New("POST only"))
		return nil, false
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, CodeBadRequest, errors.New("the body is application/json"))
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxHostBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, CodeBadRequest, fmt.Errorf("body larger than %d bytes", MaxHostBodyBytes))
			return nil, false
		}
		writeError(w, http.StatusBadRequest, CodeBadRequest, errors.New("the body could not be read"))
		return nil, false
	}
	return body, true
}

func writeError(w http.ResponseWriter, status int, code ErrorCode, err error) {
	var e ErrorResponse
	e.Error.Code, e.Error.Message = code, err.Error()
	writeJSON(w, status, e)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
