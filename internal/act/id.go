package act

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"
	"strings"
	"sync"
)

// MinIDKeyBytes is the shortest IDIssuer key accepted.
const MinIDKeyBytes = 32

const (
	idPrefix   = "act-"
	idRandSize = 16 // 128 random bits
	idMACSize  = 16 // 128-bit truncated HMAC-SHA256
	idLen      = len(idPrefix) + 2*idRandSize + 1 + 2*idMACSize
	// idDomain separates these MACs from any other use of the key.
	idDomain = "actgate/candidate_act_id/v1\x00"
)

// IDIssuer makes candidate_act_ids and checks that an id belongs to a session.
//
// tool-use-binding §6: candidate_act_id is host-generated and "MUST NOT equal toolu_* alone if
// that id can be replayed across sessions". The choice here is an id that is a MAC over the
// session id:
//
//	act-<32 hex: 128 random bits>-<32 hex: HMAC-SHA256(key, domain || session_id || 0x00 || random)[:16]>
//
// so CheckSession(id, session) is a stateless verification: an id minted in session A fails in
// session B (CodeIDSessionMismatch), whatever the agent copies. Compared with remembering ids per
// session, this needs no memory to bound or expire, survives a sidecar restart, and works across
// replicas that share the key; an id the issuer never minted is refused the same way. Rotating
// the key invalidates outstanding ids, which fails closed. Replay inside one session is not this
// type's job: the authority for an act is single-use (tool-use-binding §16 MUST 4). The vendor id
// (toolu_*, call_*, JSON-RPC id) is not part of the act id (§8: "jsonrpc id is not
// candidate_act_id"); it travels beside the act in Candidate.VendorID.
type IDIssuer struct {
	key  []byte
	rand io.Reader
	// macs reuses keyed HMAC states (hmac.New costs two SHA-256 states and the key schedule
	// on every act otherwise).
	macs sync.Pool
}

// NewIDIssuer returns an issuer with a secret key of at least MinIDKeyBytes and a random
// source (nil means crypto/rand). The key is copied.
func NewIDIssuer(key []byte, random io.Reader) (*IDIssuer, error) {
	if len(key) < MinIDKeyBytes {
		return nil, newErr(CodeContextInvalid, "key", "IDIssuer key shorter than MinIDKeyBytes")
	}
	if random == nil {
		random = rand.Reader
	}
	return &IDIssuer{key: append([]byte(nil), key...), rand: random}, nil
}

// New mints a candidate_act_id bound to sessionID.
func (i *IDIssuer) New(sessionID string) (string, error) {
	if err := checkID("session_id", sessionID); err != nil {
		return "", err
	}
	var r [idRandSize]byte
	if _, err := io.ReadFull(i.rand, r[:]); err != nil {
		return "", &Error{Code: CodeIDGeneration, Field: "candidate_act_id", Detail: "random source failed", Err: err}
	}
	var b [idLen]byte
	n := copy(b[:], idPrefix)
	n += hex.Encode(b[n:], r[:])
	b[n] = '-'
	n++
	var sum [sha256.Size]byte
	hex.Encode(b[n:], i.mac(sum[:0], sessionID, r[:]))
	return string(b[:]), nil
}

// Nonce returns 128 random bits as 32 lowercase hex characters (freshness.nonce).
func (i *IDIssuer) Nonce() (string, error) {
	var r [16]byte
	if _, err := io.ReadFull(i.rand, r[:]); err != nil {
		return "", &Error{Code: CodeIDGeneration, Field: "freshness.nonce", Detail: "random source failed", Err: err}
	}
	var b [2 * len(r)]byte
	hex.Encode(b[:], r[:])
	return string(b[:]), nil
}

// CheckSession reports whether actID was minted by this issuer for sessionID. It returns an
// error with CodeIDInvalid for an id not of this form and CodeIDSessionMismatch for one minted
// for another session or under another key. The comparison is constant-time.
func (i *IDIssuer) CheckSession(actID, sessionID string) error {
	if len(actID) != idLen || !strings.HasPrefix(actID, idPrefix) || actID[len(idPrefix)+2*idRandSize] != '-' {
		return newErr(CodeIDInvalid, "candidate_act_id", "not an actgate candidate act id")
	}
	r, err := hex.DecodeString(actID[len(idPrefix) : len(idPrefix)+2*idRandSize])
	if err != nil || !isLowerHex(actID[len(idPrefix):]) {
		return newErr(CodeIDInvalid, "candidate_act_id", "not an actgate candidate act id")
	}
	got, err := hex.DecodeString(actID[len(idPrefix)+2*idRandSize+1:])
	if err != nil {
		return newErr(CodeIDInvalid, "candidate_act_id", "not an actgate candidate act id")
	}
	if checkID("session_id", sessionID) != nil || !hmac.Equal(got, i.mac(nil, sessionID, r)) {
		return newErr(CodeIDSessionMismatch, "candidate_act_id", "id was not issued for this session")
	}
	return nil
}

// CheckAct checks the act's id against the session the caller is serving (from its transport,
// never from the act) and that the act names that session in freshness.session_id.
func (i *IDIssuer) CheckAct(a *AgentCandidateAct, sessionID string) error {
	if a.Freshness.SessionID != sessionID {
		return newErr(CodeIDSessionMismatch, "freshness.session_id", "act belongs to another session")
	}
	return i.CheckSession(a.CandidateActID, sessionID)
}

func (i *IDIssuer) mac(dst []byte, sessionID string, r []byte) []byte {
	st, _ := i.macs.Get().(*macState)
	if st == nil {
		st = &macState{h: hmac.New(sha256.New, i.key)}
	}
	st.h.Reset()
	st.buf = append(append(append(append(st.buf[:0], idDomain...), sessionID...), 0), r...)
	st.h.Write(st.buf)
	out := st.h.Sum(dst)[len(dst) : len(dst)+idMACSize]
	i.macs.Put(st)
	return out
}

// macState is a keyed HMAC and its input buffer, reused through IDIssuer.macs.
type macState struct {
	h   hash.Hash
	buf []byte
}

// isLowerHex reports whether s is lowercase hex, allowing the single '-' separator.
func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c == '-') {
			return false
		}
	}
	return true
}
