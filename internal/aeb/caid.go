package aeb

import (
	"encoding/base64"
	"encoding/hex"
	"strings"
)

// ActionTypeToolCall is the action-type segment actgate pins for a tool call: the material
// action {"tool": <name>, "args": <arguments>} of EP-TOOL-CALL-BINDING-v1 under RFC 8785 JCS and
// SHA-256 (docs/architecture.md "The action an option authorises"). It is actgate's relying-party
// pin, not a registered type: AEB defines no registry.
const ActionTypeToolCall = "actgate.tool-call.1"

// CAIDFromDigest spells an action digest ("sha256:" + 64 lowercase hex) in the CAID syntax of the
// AEB-1 case format: "caid:1:" + actionType + ":jcs-sha256:" + the 32 digest bytes in unpadded
// base64url. It only changes the spelling; the digest itself must come from the boundary's own
// canonicalization of the live call, never from the caller (AEB "Construct the Observed Material
// Action").
func CAIDFromDigest(actionType, digest string) (string, error) {
	if err := checkDigest(digest, "digest"); err != nil {
		return "", err
	}
	raw, err := hex.DecodeString(strings.TrimPrefix(digest, "sha256:"))
	if err != nil {
		return "", &InputError{Code: CodeInvalidDigest, Path: "digest", Err: err}
	}
	caid := "caid:1:" + actionType + ":jcs-sha256:" + base64.RawURLEncoding.EncodeToString(raw)
	if err := checkCAID(caid, "action_type"); err != nil {
		return "", err
	}
	return caid, nil
}
