package action

import (
	"encoding/json"

	"github.com/actgate/actgate/internal/jcs"
)

// Material returns the (non-canonical) action object {"tool": tool, "args": args}.
func Material(tool string, args json.RawMessage) []byte { return nil }

// Canonical returns the canonical bytes of the action object.
func Canonical(tool string, args json.RawMessage, mode jcs.Mode) ([]byte, error) {
	return jcs.Canonicalize(Material(tool, args), mode)
}

// Digest returns the digest of the canonical action object.
func Digest(tool string, args json.RawMessage, mode jcs.Mode) (string, error) {
	c, err := Canonical(tool, args, mode)
	if err != nil {
		return "", err
	}
	return jcs.Digest(c), nil
}
