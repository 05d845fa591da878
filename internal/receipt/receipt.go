package receipt

import (
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/actgate/actgate/internal/jcs"
	"github.com/actgate/actgate/internal/journal"
)

// Receipt is one enforcement decision or outcome: a Ledger-Anchored Validation Receipt
// (tool-use-binding-latest §1: "a signed, hash-chained enforcement artifact bound to the
// specific candidate act and its argument digest at the moment of decision"). It names the act
// and the digest of its arguments, never the arguments (docs/architecture.md "Privacy").
//
// Seq, Prev and Digest are assigned by Log.Append; Time too when the caller leaves it zero.
type Receipt struct {
	// seq numbers the receipts of one log 1, 2, 3, ... without gaps, at most 2^53-1 (an
	// I-JSON integer, so that RFC 8785 writes it exactly).
	Seq uint64 `json:"seq"`
	// prev is the digest of the receipt with seq-1; ZeroDigest for seq 1.
	Prev string `json:"prev"`
	// time is when the decision was made (UTC, RFC 3339 with nanoseconds as needed).
	Time time.Time `json:"time"`
	// act_id identifies the AgentCandidateAct (internal/act). Required.
	ActID string `json:"act_id"`
	// tool is the tool name the act calls.
	Tool string `json:"tool"`
	// server is the destination: the MCP server identity or origin.
	Server string `json:"server,omitempty"`
	// class is the consequence class (tool-use-binding §20).
	Class string `json:"class,omitempty"`
	// arguments_digest is the digest of the canonical arguments. Required.
	ArgumentsDigest string `json:"arguments_digest"`
	// action_digest is the digest of {"tool":...,"args":...} when the act has one.
	ActionDigest string `json:"action_digest,omitempty"`
	// decision is one of the Decision* constants. Required.
	Decision string `json:"decision"`
	// code is the EF code of a deny or escalation, or the reason of an outcome.
	Code string `json:"code,omitempty"`
	// authority_id names the consumed authority of an allow.
	AuthorityID string `json:"authority_id,omitempty"`
	// operation_id names the dispatch journal record.
	OperationID string `json:"operation_id,omitempty"`
	// state is the AEB lifecycle state an outcome receipt records (EXECUTED, FAILED,
	// INDETERMINATE, ...). Required when decision is "outcome".
	State string `json:"state,omitempty"`
	// digest is DigestPrefix + hex SHA-256 of the RFC 8785 canonical form of this receipt
	// without the digest member.
	Digest string `json:"digest"`
}

// Decisions a receipt records.
const (
	DecisionAllow      = "allow"
	DecisionDeny       = "deny"
	DecisionEscalate   = "escalate"
	DecisionAuditAllow = "audit-allow" // mode: Audit let a call through that enforcement would deny
	DecisionOutcome    = "outcome"     // the classified outcome of an allowed act (State says which)
)

// ZeroDigest is the prev of the first receipt of a log.
const ZeroDigest = jcs.DigestPrefix + "0000000000000000000000000000000000000000000000000000000000000000"

// Bounds. MaxFieldBytes keeps any one string member, and so a whole line, small: receipts hold
// identifiers and digests, never payloads.
const (
	MaxFieldBytes = 1024
	MaxLineBytes  = 16 << 10
)

func validDecision(d string) bool {
	switch d {
	case DecisionAllow, DecisionDeny, DecisionEscalate, DecisionAuditAllow, DecisionOutcome:
		return true
	}
	return false
}

// validateContent checks the members a caller supplies. It never quotes a value: a field that
// should hold a digest might hold something a caller should not have put in a log.
func validateContent(r *Receipt) error {
	if r.ActID == "" {
		return fmt.Errorf("%w: act_id is empty", ErrInvalid)
	}
	if !validDecision(r.Decision) {
		return fmt.Errorf("%w: decision is not one of allow, deny, escalate, audit-allow, outcome", ErrInvalid)
	}
	if r.Decision == DecisionOutcome && r.State == "" {
		return fmt.Errorf("%w: an outcome receipt needs a state", ErrInvalid)
	}
	if !jcs.IsDigest(r.ArgumentsDigest) {
		return fmt.Errorf("%w: arguments_digest is not a sha256: digest", ErrInvalid)
	}
	if r.ActionDigest != "" && !jcs.IsDigest(r.ActionDigest) {
		return fmt.Errorf("%w: action_digest is not a sha256: digest", ErrInvalid)
	}
	for _, f := range [...]struct{ name, v string }{
		{"act_id", r.ActID}, {"tool", r.Tool}, {"server", r.Server}, {"class", r.Class},
		{"code", r.Code}, {"authority_id", r.AuthorityID}, {"operation_id", r.OperationID}, {"state", r.State},
	} {
		if len(f.v) > MaxFieldBytes {
			return fmt.Errorf("%w: %s is longer than %d bytes", ErrInvalid, f.name, MaxFieldBytes)
		}
		if !utf8.ValidString(f.v) {
			return fmt.Errorf("%w: %s is not UTF-8", ErrInvalid, f.name)
		}
	}
	if y := r.Time.Year(); y < 1 || y > 9999 || r.Time.IsZero() {
		return fmt.Errorf("%w: time is zero or outside years 1-9999", ErrInvalid)
	}
	return nil
}

// validateChained checks what the log assigns, on a receipt read back.
func validateChained(r *Receipt) error {
	if r.Seq == 0 || r.Seq > jcs.MaxSafeInteger {
		return fmt.Errorf("%w: seq is 0 or above 2^53-1", ErrInvalid)
	}
	if !jcs.IsDigest(r.Prev) {
		return fmt.Errorf("%w: prev is not a sha256: digest", ErrInvalid)
	}
	if r.Seq == 1 && r.Prev != ZeroDigest {
		return fmt.Errorf("%w: the first receipt's prev is not the zero digest", ErrInvalid)
	}
	if !jcs.IsDigest(r.Digest) {
		return fmt.Errorf("%w: digest is not a sha256: digest", ErrInvalid)
	}
	return validateContent(r)
}

// appendCanonical appends the RFC 8785 canonical form of r, with or without its digest member,
// to dst. The members are written in the order JCS sorts them (UTF-16 code units; all names are
// ASCII), empty omitempty members are left out as encoding/json would, and time is written in
// UTC as time.Time.MarshalJSON writes it, so that the result equals
// jcs.Canonicalize(json.Marshal(r)) (TestCanonicalMatchesJCS) without a parse.
func appendCanonical(dst []byte, r *Receipt, withDigest bool) ([]byte, error) {
	out, _, err := appendCanonicalAt(dst, r, withDigest)
	return out, err
}

// appendCanonicalAt is appendCanonical that also returns the offset in the result at which the
// digest member is (withDigest) or would be (without it) written: the log encodes a receipt
// once without its digest, hashes those bytes, and inserts the member there.
func appendCanonicalAt(dst []byte, r *Receipt, withDigest bool) ([]byte, int, error) {
	var err error
	str := func(name, v string, omitEmpty bool) {
		if err != nil || (omitEmpty && v == "") {
			return
		}
		dst = append(dst, ',', '"')
		dst = append(dst, name...)
		dst = append(dst, '"', ':')
		dst, err = jcs.AppendString(dst, v)
	}
	dst = append(dst, `{"act_id":`...)
	if dst, err = jcs.AppendString(dst, r.ActID); err != nil {
		return dst, 0, err
	}
	str("action_digest", r.ActionDigest, true)
	str("arguments_digest", r.ArgumentsDigest, false)
	str("authority_id", r.AuthorityID, true)
	str("class", r.Class, true)
	str("code", r.Code, true)
	str("decision", r.Decision, false)
	digestAt := len(dst)
	if withDigest {
		str("digest", r.Digest, false)
	}
	str("operation_id", r.OperationID, true)
	str("prev", r.Prev, false)
	if err != nil {
		return dst, 0, err
	}
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendUint(dst, r.Seq, 10)
	str("server", r.Server, true)
	str("state", r.State, true)
	if err != nil {
		return dst, 0, err
	}
	dst = append(dst, `,"time":"`...)
	dst = r.Time.UTC().AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, '"')
	str("tool", r.Tool, false)
	if err != nil {
		return dst, 0, err
	}
	return append(dst, '}'), digestAt, nil
}

// digestOf returns the receipt digest of r: the digest of its canonical form without the
// digest member. scratch is reused.
func digestOf(scratch []byte, r *Receipt) (string, []byte, error) {
	b, err := appendCanonical(scratch[:0], r, false)
	if err != nil {
		return "", b, err
	}
	return jcs.Digest(b), b, nil
}

// Canonical returns the receipt's RFC 8785 canonical form: exactly its line in the log,
// without the newline. This is the form to hand on as an opaque blob (the dispatch journal's
// receipts) or to hash. (encoding/json would escape <, > and & and is not canonical.)
func (r Receipt) Canonical() ([]byte, error) {
	b, err := appendCanonical(nil, &r, true)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return b, nil
}

// OutcomeOf is the receipt of a dispatch's outcome as the journal recorded it: decision
// "outcome" with the record's state, act, authority, operation and digests. server names the
// record's upstream; at is the receipt's time. The sidecar records each outcome with it, and
// `actgate serve` each dispatch it settles by reconciliation (code RECONCILED).
func OutcomeOf(rec journal.DispatchRecord, server string, at time.Time) Receipt {
	return Receipt{
		Time: at.UTC(), ActID: rec.ActID, Tool: rec.Tool, Server: server,
		ArgumentsDigest: rec.ArgumentsDigest, ActionDigest: rec.ActionDigest, Decision: DecisionOutcome,
		AuthorityID: rec.AuthorityID, OperationID: rec.OperationID, State: string(rec.State),
	}
}
