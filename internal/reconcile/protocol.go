package reconcile

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"

	"github.com/actgate/actgate/internal/jcs"
)

// Protocol constants (see the package documentation).
const (
	// SignatureHeader carries the answer's MAC.
	SignatureHeader = "Actgate-Reconciliation-Signature"
	// signaturePrefix names the one MAC scheme there is.
	signaturePrefix = "v1="
	// macContext separates these MACs from any other use of the key.
	macContext = "actgate-reconciliation-v1\x00"
	// MaxAnswerBytes bounds an answer body; a longer one is refused unread.
	MaxAnswerBytes = 64 << 10
	// MinMACKeyBytes is the shortest response MAC key accepted (256 bits).
	MinMACKeyBytes = 32
	// nonceBytes is the size of a query nonce before hex encoding.
	nonceBytes = 16
)

// Field bounds of a query and an answer, those of the Act fields they echo.
const (
	maxOperationID = 256
	maxTool        = 128
	maxServer      = 63
)

// Outcome is what the provider says became of the operation.
type Outcome string

// Outcomes.
const (
	// OutcomeExecuted: the exact effect occurred.
	OutcomeExecuted Outcome = "EXECUTED"
	// OutcomeFailed: the effect did not occur.
	OutcomeFailed Outcome = "FAILED"
	// OutcomeUnknown: the provider has no conclusive record.
	OutcomeUnknown Outcome = "UNKNOWN"
)

// Query names one operation. Ask fills Nonce.
type Query struct {
	OperationID  string `json:"operationID"`
	ActionDigest string `json:"actionDigest"`
	Tool         string `json:"tool"`
	Server       string `json:"server"`
	Nonce        string `json:"nonce"`
}

// Answer is an authenticated, well-formed answer. Nothing in it is trusted to match the query
// until Judge says so.
type Answer struct {
	// Query is what the answer says it answers (the echoed members).
	Query
	Outcome    Outcome
	ObservedAt time.Time
	// Evidence is the provider's optional evidence object, canonical JSON (nil if absent).
	Evidence json.RawMessage
	// EvidenceDigest is the digest of the canonical answer body: what the act records as the
	// evidence that settled it.
	EvidenceDigest string
}

// EncodeQuery returns the canonical body of q.
func EncodeQuery(q Query) ([]byte, error) {
	raw, err := json.Marshal(q)
	if err != nil {
		return nil, errorf(ErrConfig, "encode query: %v", err)
	}
	out, err := jcs.Canonicalize(raw, jcs.Full)
	if err != nil {
		return nil, errorf(ErrConfig, "encode query: %v", err)
	}
	return out, nil
}

// ParseQuery strictly parses a query body: what a reconciliation endpoint does with the request
// (the test endpoints here use it, and so can an implementer in Go).
func ParseQuery(body []byte) (Query, error) {
	if len(body) > MaxAnswerBytes {
		return Query{}, errorf(ErrMalformed, "query of %d bytes exceeds %d", len(body), MaxAnswerBytes)
	}
	if _, err := jcs.Canonicalize(body, jcs.Full); err != nil {
		return Query{}, errorf(ErrMalformed, "query is not I-JSON: %v", err)
	}
	members, err := members(body, "actionDigest", "nonce", "operationID", "server", "tool")
	if err != nil {
		return Query{}, err
	}
	var q Query
	if err := queryFields(members, &q, true); err != nil {
		return Query{}, err
	}
	return q, nil
}

// Sign returns the SignatureHeader value for body under key.
func Sign(key, body []byte) string {
	return signaturePrefix + hex.EncodeToString(mac(key, body))
}

// Verify checks the SignatureHeader value sig of body under key, in constant time.
func Verify(key, body []byte, sig string) error {
	if !strings.HasPrefix(sig, signaturePrefix) {
		return errorf(ErrUnauthenticated, "no %s %s signature", SignatureHeader, strings.TrimSuffix(signaturePrefix, "="))
	}
	got, err := hex.DecodeString(sig[len(signaturePrefix):])
	if err != nil || len(got) != sha256.Size || strings.ToLower(sig) != sig {
		return errorf(ErrUnauthenticated, "signature is not 64 lowercase hex digits")
	}
	if !hmac.Equal(got, mac(key, body)) {
		return errorf(ErrUnauthenticated, "signature does not verify")
	}
	return nil
}

func mac(key, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(macContext))
	h.Write(body)
	return h.Sum(nil)
}

// EncodeAnswer returns a canonical answer body for a (an endpoint's side; tests use it). Nonce
// and every other member are taken as given; EvidenceDigest is ignored.
func EncodeAnswer(a Answer) ([]byte, error) {
	w := struct {
		Query
		Outcome    Outcome         `json:"outcome"`
		ObservedAt string          `json:"observedAt"`
		Evidence   json.RawMessage `json:"evidence,omitempty"`
	}{a.Query, a.Outcome, a.ObservedAt.UTC().Format(time.RFC3339Nano), a.Evidence}
	raw, err := json.Marshal(w)
	if err != nil {
		return nil, err
	}
	return jcs.Canonicalize(raw, jcs.Full)
}

// ParseAnswer strictly parses an answer body whose MAC the caller has verified. Any defect is
// ErrMalformed; nothing is guessed.
func ParseAnswer(body []byte) (Answer, error) {
	if len(body) > MaxAnswerBytes {
		return Answer{}, errorf(ErrMalformed, "answer of %d bytes exceeds %d", len(body), MaxAnswerBytes)
	}
	canonical, err := jcs.Canonicalize(body, jcs.Full)
	if err != nil {
		return Answer{}, errorf(ErrMalformed, "answer is not I-JSON: %v", err)
	}
	ms, err := members(body, "actionDigest", "evidence", "nonce", "observedAt", "operationID", "outcome", "server", "tool")
	if err != nil {
		return Answer{}, err
	}
	var a Answer
	if err := queryFields(ms, &a.Query, true); err != nil {
		return Answer{}, err
	}
	outcome, err := stringMember(ms, "outcome", 16)
	if err != nil {
		return Answer{}, err
	}
	switch a.Outcome = Outcome(outcome); a.Outcome {
	case OutcomeExecuted, OutcomeFailed, OutcomeUnknown:
	default:
		return Answer{}, errorf(ErrMalformed, "outcome is not EXECUTED, FAILED or UNKNOWN")
	}
	observed, err := stringMember(ms, "observedAt", 64)
	if err != nil {
		return Answer{}, err
	}
	if a.ObservedAt, err = time.Parse(time.RFC3339Nano, observed); err != nil {
		return Answer{}, errorf(ErrMalformed, "observedAt is not an RFC 3339 time")
	}
	if ev, ok := ms["evidence"]; ok {
		if len(ev) == 0 || ev[0] != '{' {
			return Answer{}, errorf(ErrMalformed, "evidence is not a JSON object")
		}
		if a.Evidence, err = jcs.Canonicalize(ev, jcs.Full); err != nil {
			return Answer{}, errorf(ErrMalformed, "evidence: %v", err)
		}
	}
	a.EvidenceDigest = jcs.Digest(canonical)
	return a, nil
}

// members decodes body as one JSON object whose member names are all in allowed, matched
// exactly (encoding/json alone would match names case-insensitively).
// The caller has checked body is I-JSON (jcs.Canonicalize), so no name is duplicated.
func members(body []byte, allowed ...string) (map[string]json.RawMessage, error) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, errorf(ErrMalformed, "not a JSON object")
	}
	var ms map[string]json.RawMessage
	if err := json.Unmarshal(body, &ms); err != nil {
		return nil, errorf(ErrMalformed, "not a JSON object: %v", err)
	}
	for name := range ms {
		known := false
		for _, a := range allowed {
			if name == a {
				known = true
				break
			}
		}
		if !known {
			return nil, errorf(ErrMalformed, "unknown member %q", clip(name))
		}
	}
	return ms, nil
}

// queryFields reads the five query members of ms into q.
func queryFields(ms map[string]json.RawMessage, q *Query, requireNonce bool) error {
	var err error
	if q.OperationID, err = stringMember(ms, "operationID", maxOperationID); err != nil {
		return err
	}
	if q.ActionDigest, err = stringMember(ms, "actionDigest", 71); err != nil {
		return err
	}
	if !jcs.IsDigest(q.ActionDigest) {
		return errorf(ErrMalformed, "actionDigest is not sha256:<64 lowercase hex>")
	}
	if q.Tool, err = stringMember(ms, "tool", maxTool); err != nil {
		return err
	}
	if q.Server, err = stringMember(ms, "server", maxServer); err != nil {
		return err
	}
	if q.Nonce, err = stringMember(ms, "nonce", 2*nonceBytes); err != nil {
		return err
	}
	if requireNonce && !isNonce(q.Nonce) {
		return errorf(ErrMalformed, "nonce is not %d lowercase hex digits", 2*nonceBytes)
	}
	return nil
}

// stringMember reads the required, non-empty string member name of at most max bytes.
func stringMember(ms map[string]json.RawMessage, name string, max int) (string, error) {
	raw, ok := ms[name]
	if !ok {
		return "", errorf(ErrMalformed, "member %s is missing", name)
	}
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", errorf(ErrMalformed, "member %s is not a string", name)
	}
	if s == "" || len(s) > max {
		return "", errorf(ErrMalformed, "member %s is empty or longer than %d bytes", name, max)
	}
	return s, nil
}

func isNonce(s string) bool {
	if len(s) != 2*nonceBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// clip shortens untrusted text quoted in an error.
func clip(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}
