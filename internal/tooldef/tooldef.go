// Package tooldef digests an MCP tool definition as an upstream lists it in tools/list, for
// pinning tool definitions against silent change (docs/api.md "Pinned tool definitions").
//
// The digest covers the members a model reads or a client validates against: name, title,
// description, inputSchema, outputSchema and annotations. Each present member (a member with
// the value null counts as absent) goes into one JSON object, which is canonicalized with RFC
// 8785 (internal/jcs, mode Full: I-JSON, any finite number) and hashed with SHA-256; the digest
// is the lowercase hex of that hash. Every other member (_meta, icons, execution, members of
// later revisions) is left out: they carry transport hints and the gate's own annotation, and
// the gate adds emits_binding_moment to annotations after digesting, so the digest is the
// upstream's alone.
package tooldef

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/actgate/actgate/internal/jcs"
)

// Members are the definition members the digest covers, in the order diffs name them.
var Members = []string{"name", "title", "description", "inputSchema", "outputSchema", "annotations"}

// MaxDefinitionBytes bounds one tool definition the digest reads.
const MaxDefinitionBytes = 1 << 20

// ErrDefinition is the refusal of a tool definition that cannot be digested.
var ErrDefinition = errors.New("tooldef: the tool definition cannot be digested")

// Definition is one tool definition's digests.
type Definition struct {
	// Name is the tool's name.
	Name string
	// Digest is the lowercase hex SHA-256 of the canonical definition.
	Digest string
	// Members maps each present member to the lowercase hex SHA-256 of its canonical value.
	Members map[string]string
}

// Of digests one tool object of a tools/list result, its members as the upstream wrote them.
// A tool without a string name, a member that is not canonical I-JSON (a duplicate member
// name, an unpaired surrogate, nesting beyond jcs.MaxDepthFull) or a definition larger than
// MaxDefinitionBytes is refused with an error wrapping ErrDefinition.
func Of(tool map[string]json.RawMessage) (Definition, error) {
	var d Definition
	n, ok := tool["name"]
	if !ok || json.Unmarshal(n, &d.Name) != nil || d.Name == "" {
		return Definition{}, fmt.Errorf("%w: no string name", ErrDefinition)
	}
	var buf bytes.Buffer
	buf.WriteByte('{')
	d.Members = make(map[string]string, len(Members))
	size := 0
	for _, m := range Members {
		v, ok := tool[m]
		if !ok || string(bytes.TrimSpace(v)) == "null" {
			continue
		}
		if size += len(v); size > MaxDefinitionBytes {
			return Definition{}, fmt.Errorf("%w: larger than %d bytes", ErrDefinition, MaxDefinitionBytes)
		}
		c, err := jcs.Canonicalize(v, jcs.Full)
		if err != nil {
			return Definition{}, fmt.Errorf("%w: %s: %v", ErrDefinition, m, err)
		}
		if buf.Len() > 1 {
			buf.WriteByte(',')
		}
		k, _ := json.Marshal(m)
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(c)
		d.Members[m] = hash(c)
	}
	buf.WriteByte('}')
	// The members are written in an order that is not RFC 8785's; canonicalizing the whole
	// object sorts them (and is the definition the docs state).
	c, err := jcs.Canonicalize(buf.Bytes(), jcs.Full)
	if err != nil {
		return Definition{}, fmt.Errorf("%w: %v", ErrDefinition, err)
	}
	d.Digest = hash(c)
	return d, nil
}

// Parse digests one tool definition given as JSON text (an element of a tools/list result's
// tools array).
func Parse(raw []byte) (Definition, error) {
	if len(raw) > MaxDefinitionBytes+4096 {
		return Definition{}, fmt.Errorf("%w: larger than %d bytes", ErrDefinition, MaxDefinitionBytes)
	}
	var tool map[string]json.RawMessage
	if err := json.Unmarshal(raw, &tool); err != nil || tool == nil {
		return Definition{}, fmt.Errorf("%w: not a JSON object", ErrDefinition)
	}
	return Of(tool)
}

// Changed names the members whose digests differ between old and new, in Members order; nil
// when old records no members (a digest listed in a policy has none).
func Changed(old, new map[string]string) []string {
	if len(old) == 0 {
		return nil
	}
	var out []string
	for _, m := range Members {
		if old[m] != new[m] {
			out = append(out, m)
		}
	}
	return slices.Clip(out)
}

// IsDigest reports whether s is a definition digest: 64 lowercase hex digits.
func IsDigest(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func hash(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
