package hostloop

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
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
	if r.Destination != "" {
		if err := ParseDestination(r.Destination); err != nil {
			return EnforceRequest{}, err
		}
	}
	return r, nil
}

// MaxDestinationBytes bounds EnforceRequest.Destination (a server URL is at most 2048 bytes in
// a ToolPolicy, api/v1alpha1 ToolServer.url).
const MaxDestinationBytes = 2048

// ParseDestination checks a host's live destination, untrusted input: an absolute http or https
// URL with a host of letters, digits, dots and hyphens or a bracketed IPv6 literal, an optional
// port 1-65535, no user information (the "https://payments.example@evil.example" spelling that
// shows one host and reaches another), no control characters, spaces or backslashes (which
// URL parsers disagree about), at most MaxDestinationBytes. The policy compares it by scheme,
// host and port (and, against a server's own URL, path): internal/policy "Destinations".
func ParseDestination(raw string) error {
	bad := func(format string, args ...any) error { return badField("destination", format, args...) }
	if len(raw) > MaxDestinationBytes {
		return bad("longer than %d bytes", MaxDestinationBytes)
	}
	for _, c := range []byte(raw) {
		if c <= 0x20 || c == 0x7f || c == '\\' || c >= 0x80 {
			return bad("must be an ASCII URL without spaces, control characters or backslashes")
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return bad("not a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return bad("must be an absolute http or https URL")
	}
	if u.Opaque != "" || u.Host == "" {
		return bad("must be an absolute http or https URL with a host")
	}
	if u.User != nil || strings.Contains(u.Host, "@") {
		return bad("must not carry user information")
	}
	host := u.Hostname()
	if strings.HasPrefix(u.Host, "[") {
		if ip, err := netip.ParseAddr(host); err != nil || !ip.Is6() || ip.Zone() != "" {
			return bad("the host is not an IPv6 literal")
		}
	} else if !hostName.MatchString(host) {
		return bad("the host must be letters, digits, dots and hyphens")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return bad("the port must be 1-65535")
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return bad("empty port")
	}
	return nil
}

var hostName = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?$`)

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
