package rounds

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/actgate/actgate/internal/jcs"
	"github.com/actgate/actgate/internal/mcpproxy/stateless"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

const (
	// MaxInputRequests bounds the upstream requests one round collects (and so the
	// inputResponses a continuation may carry).
	MaxInputRequests = 16
	// MaxRequestState bounds the requestState a continuation may carry.
	MaxRequestState = 512
	// Tag opens every requestState the gate mints.
	Tag = "ag1."
)

// Claims are what a requestState the gate mints says, under its MAC.
type Claims struct {
	Call    string `json:"c"`
	Round   int    `json:"r"`
	Expires int64  `json:"x"`
	// Bound is a digest of the agent, the server, the request's binding, the operation id of a
	// dispatched tools/call and the round's pending upstream request ids (Bound).
	Bound string `json:"b"`
}

// Error is why a continuation member is refused: a requestState that is not one the gate
// minted, or a malformed inputResponses.
type Error string

func (e Error) Error() string { return string(e) }

// NewKey returns a random MAC key for one proxy's states.
func NewKey() []byte {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		panic("mcpproxy: no randomness for the requestState key: " + err.Error())
	}
	return key
}

// Mint is the requestState saying c, under key.
func Mint(key []byte, c Claims) string {
	payload, _ := json.Marshal(c)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(Tag))
	mac.Write(payload)
	return Tag + base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil)[:16])
}

// Parse verifies a requestState's MAC under key and returns its claims; it checks nothing else.
func Parse(key []byte, raw json.RawMessage) (Claims, error) {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return Claims{}, Error("requestState must be a string")
	}
	if len(s) > MaxRequestState {
		return Claims{}, Error("requestState is longer than " + strconv.Itoa(MaxRequestState) + " bytes")
	}
	body, ok := strings.CutPrefix(s, Tag)
	if !ok {
		return Claims{}, Error("requestState was not issued by this gate")
	}
	enc, sig, ok := strings.Cut(body, ".")
	if !ok {
		return Claims{}, Error("requestState is malformed")
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(enc)
	got, err2 := base64.RawURLEncoding.DecodeString(sig)
	if err1 != nil || err2 != nil {
		return Claims{}, Error("requestState is malformed")
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(Tag))
	mac.Write(payload)
	if !hmac.Equal(got, mac.Sum(nil)[:16]) {
		return Claims{}, Error("requestState fails verification")
	}
	var c Claims
	if json.Unmarshal(payload, &c) != nil || c.Call == "" {
		return Claims{}, Error("requestState is malformed")
	}
	return c, nil
}

// Bound is the digest a round's state binds: the agent, the server, the request's method and
// binding (RequestBinding), the operation id of a dispatched tools/call, the round, and the
// round's pending upstream requests (by key, with the upstream's ids).
func Bound(agent, server, method string, binding [32]byte, operation string, round int, waiting map[string]jsonrpc.ID) string {
	keys := make([]string, 0, len(waiting))
	for k := range waiting {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, s := range []string{agent, server, method, hex.EncodeToString(binding[:]), operation, strconv.Itoa(round)} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	for _, k := range keys {
		id, _ := json.Marshal(waiting[k].Raw())
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write(id)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// RequestBinding is the digest a continuation must repeat: the request's method and params
// without _meta, requestState and inputResponses (for a tools/call, its name and arguments), in
// canonical form, so that one approval never continues with other arguments.
func RequestBinding(sr *stateless.Request) ([32]byte, bool) {
	m := make(map[string]json.RawMessage, len(sr.Params))
	for k, v := range sr.Params {
		switch k {
		case "_meta", "requestState", "inputResponses":
			continue
		}
		m[k] = v
	}
	raw, err := wire.MarshalNoEscape(m)
	if err != nil {
		return [32]byte{}, false
	}
	canon, err := jcs.Canonicalize(raw, jcs.Full)
	if err != nil {
		return [32]byte{}, false
	}
	h := sha256.New()
	h.Write([]byte(sr.Req.Method))
	h.Write([]byte{0})
	h.Write(canon)
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out, true
}

// ParseInputResponses reads a continuation's inputResponses: an object of at most
// MaxInputRequests members, each an object (the agent's result for one input request).
func ParseInputResponses(raw json.RawMessage) (map[string]json.RawMessage, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	if !stateless.IsJSONObject(raw) {
		return nil, Error("inputResponses must be an object")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, Error("inputResponses must be an object")
	}
	if len(m) > MaxInputRequests {
		return nil, Error("inputResponses has more than " + strconv.Itoa(MaxInputRequests) + " members")
	}
	for k, v := range m {
		if !stateless.IsJSONObject(v) {
			return nil, Error(fmt.Sprintf("inputResponses[%q] must be an object", wire.Clip(k, 64)))
		}
	}
	return m, nil
}
