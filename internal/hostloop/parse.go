package hostloop

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"unicode/utf8"

	"github.com/actgate/actgate/internal/journal"
	sigsjson "sigs.k8s.io/json"
)

// RequestError is a malformed host-loop request.
type RequestError struct {
	Field  string
	Detail string
}

func (e *RequestError) Error() string { return fmt.Sprintf("hostloop: %s: %s", e.Field, e.Detail) }

func badField(field, format string, args ...any) error {
	return &RequestError{Field: field, Detail: fmt.Sprintf(format, args...)}
}

// decodeStrict decodes exactly one JSON object into v: case-sensitive member names, no unknown
// or duplicate members (sigs.k8s.io/json, as the API server and internal/review decode).
func decodeStrict(body []byte, v any) error {
	if len(body) > MaxHostBodyBytes {
		return badField("$", "body of %d bytes exceeds %d", len(body), MaxHostBodyBytes)
	}
	if !utf8.Valid(body) {
		return badField("$", "not UTF-8")
	}
	strict, err := sigsjson.UnmarshalStrict(body, v)
	if err != nil {
		if ok, off := sigsjson.SyntaxErrorOffset(err); ok {
			return badField("$", "invalid JSON at byte %d", off)
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return badField("$", "member %s has the wrong JSON type", te.Field)
		}
		return badField("$", "%s", clip(err.Error()))
	}
	if len(strict) > 0 {
		return badField("$", "%s", clip(strict[0].Error()))
	}
	return nil
}

// ParseEnforceRequest parses and checks a /v1/enforce body. The block itself is the vendor
// adapter's to check (Enforce).
func ParseEnforceRequest(body []byte) (EnforceRequest, error) {
	var r EnforceRequest
	if err := decodeStrict(body, &r); err != nil {
		return EnforceRequest{}, err
	}
	switch r.Vendor {
	case HostAnthropic, HostOpenAI, HostOpenAIResponses:
	case "":
		return EnforceRequest{}, badField("vendor", "required")
	default:
		return EnforceRequest{}, badField("vendor", "must be %s, %s or %s", HostAnthropic, HostOpenAI, HostOpenAIResponses)
	}
	if len(r.Block) == 0 || string(r.Block) == "null" {
		return EnforceRequest{}, badField("block", "required")
	}
	if r.Server != "" && (!dnsLabel.MatchString(r.Server) || len(r.Server) > 63) {
		return EnforceRequest{}, badField("server", "not a server name")
	}
	if len(r.Session) > 256 || !printable(r.Session) {
		return EnforceRequest{}, badField("session", "at most 256 printable characters")
	}
	switch r.Provenance {
	case "", "user", "system", "retrieval", "tool_output":
	default:
		return EnforceRequest{}, badField("provenance", "must be user, system, retrieval or tool_output")
	}
	return r, nil
}

// ParseCompleteRequest parses and checks a /v1/complete body.
func ParseCompleteRequest(body []byte) (CompleteRequest, error) {
	var r CompleteRequest
	if err := decodeStrict(body, &r); err != nil {
		return CompleteRequest{}, err
	}
	if r.OperationID == "" || len(r.OperationID) > journal.MaxIDLength || !printable(r.OperationID) {
		return CompleteRequest{}, badField("operation_id", "required, at most %d printable characters", journal.MaxIDLength)
	}
	switch r.Outcome {
	case HostExecuted, HostFailed, HostIndeterminate:
	default:
		return CompleteRequest{}, badField("outcome", "must be %s, %s or %s", HostExecuted, HostFailed, HostIndeterminate)
	}
	if len(r.Result) > journal.MaxResultBytes {
		return CompleteRequest{}, badField("result", "larger than %d bytes", journal.MaxResultBytes)
	}
	return r, nil
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

func printable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// clip bounds an untrusted string for errors and logs.
func clip(s string) string {
	if len(s) > 128 {
		return s[:128] + "…"
	}
	return s
}
