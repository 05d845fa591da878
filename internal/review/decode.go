package review

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	sigsjson "sigs.k8s.io/json"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/journal"
)

// Bounds on a review.
const (
	// MaxReviewBytes bounds a request or response body: the act, and arguments up to the act
	// package's 4 MiB input bound, with room for the envelope.
	MaxReviewBytes = 5 << 20
	// MaxUIDLength bounds request.uid.
	MaxUIDLength = 128
)

// ErrBadReview is wrapped by every error of DecodeRequest and DecodeResponse.
var ErrBadReview = errors.New("review: malformed ActReview")

// FieldError is a malformed review, naming the field.
type FieldError struct {
	// Field is the JSON path of the offending member, e.g. "request.consume.authorityID".
	Field string
	// Detail says what is wrong; it never repeats argument values.
	Detail string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("%v: %s: %s", ErrBadReview, e.Field, e.Detail)
}

// Unwrap makes a FieldError match ErrBadReview.
func (e *FieldError) Unwrap() error { return ErrBadReview }

func bad(field, format string, args ...any) error {
	return &FieldError{Field: field, Detail: fmt.Sprintf(format, args...)}
}

// decodeStrict decodes exactly one JSON value into v: member names match case-sensitively, and
// unknown or duplicate members are refused (sigs.k8s.io/json, as the API server decodes).
func decodeStrict(body []byte, v any) error {
	if len(body) > MaxReviewBytes {
		return bad("$", "body of %d bytes exceeds %d", len(body), MaxReviewBytes)
	}
	if !utf8.Valid(body) {
		return bad("$", "not UTF-8")
	}
	strict, err := sigsjson.UnmarshalStrict(body, v)
	if err != nil {
		return bad("$", "%s", jsonProblem(err))
	}
	if len(strict) > 0 {
		return bad("$", "%s", clip(strict[0].Error()))
	}
	return nil
}

// jsonProblem describes a decoding error without quoting the input.
func jsonProblem(err error) string {
	if ok, off := sigsjson.SyntaxErrorOffset(err); ok {
		return fmt.Sprintf("invalid JSON at byte %d", off)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("member %s has the wrong JSON type", te.Field)
	}
	return clip(err.Error())
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

func checkTypeMeta(r *ActReview) error {
	if r.APIVersion != APIVersion {
		return bad("apiVersion", "must be %s", APIVersion)
	}
	if r.Kind != Kind {
		return bad("kind", "must be %s", Kind)
	}
	return nil
}

func checkUID(field string, uid types.UID) error {
	if uid == "" || len(uid) > MaxUIDLength || !utf8.ValidString(string(uid)) {
		return bad(field, "must be 1-%d characters", MaxUIDLength)
	}
	for _, c := range uid {
		if c < 0x20 || c == 0x7f {
			return bad(field, "must not contain control characters")
		}
	}
	return nil
}

// DecodeRequest parses a review as the service receives it. It accepts exactly one ActReview of
// this group, version and kind with a request and no response, no unknown members, and the
// members the operation needs, each well formed; the act and arguments are checked further by
// the service. On error it still returns the uid when one could be read, so the response can
// echo it.
func DecodeRequest(body []byte) (*ActReview, types.UID, error) {
	var r ActReview
	if err := decodeStrict(body, &r); err != nil {
		return nil, "", err
	}
	var uid types.UID
	if r.Request != nil && checkUID("request.uid", r.Request.UID) == nil {
		uid = r.Request.UID
	}
	if err := checkTypeMeta(&r); err != nil {
		return nil, uid, err
	}
	if r.Response != nil {
		return nil, uid, bad("response", "a request must not carry a response")
	}
	req := r.Request
	if req == nil {
		return nil, "", bad("request", "required")
	}
	if err := checkUID("request.uid", req.UID); err != nil {
		return nil, "", err
	}
	switch req.Operation {
	case OperationReview:
		if err := checkReview(req); err != nil {
			return nil, uid, err
		}
	case OperationConsume:
		if err := checkConsume(req); err != nil {
			return nil, uid, err
		}
	case OperationReport:
		if err := checkReport(req); err != nil {
			return nil, uid, err
		}
	case OperationPermit:
		if err := checkPermit(req); err != nil {
			return nil, uid, err
		}
	case OperationRefusal:
		if err := checkRefusal(req); err != nil {
			return nil, uid, err
		}
	case OperationPropose:
		if err := checkPropose(req); err != nil {
			return nil, uid, err
		}
	default:
		return nil, uid, bad("request.operation", "must be %s, %s, %s, %s, %s or %s", OperationReview, OperationPermit,
			OperationConsume, OperationReport, OperationRefusal, OperationPropose)
	}
	return &r, uid, nil
}

// checkReview checks a Review: a call under review and, optionally, the operation a grant is
// consumed by.
func checkReview(req *Request) error {
	if req.Permit != nil && !validOperationID(req.Permit.OperationID) {
		return bad("request.permit.operationID", "must be 1-%d bytes of UTF-8", journal.MaxIDLength)
	}
	if req.Refusal != nil {
		return bad("request.refusal", "only for operation %s", OperationRefusal)
	}
	return checkCall(req)
}

// checkPropose checks a Propose: a session, an envelope, and 2 to 4 calls, each a server
// name, a tool and an arguments object. The envelope and the calls are checked against each
// other by the service.
func checkPropose(req *Request) error {
	p := req.Proposal
	switch {
	case p == nil:
		return bad("request.proposal", "required for operation %s", OperationPropose)
	case len(req.Act) != 0 || len(req.Arguments) != 0 || req.Server != "" || req.Consume != nil || req.Report != nil ||
		req.Permit != nil || req.Refusal != nil:
		return bad("request", "operation %s carries only its proposal", OperationPropose)
	case p.Session == "" || len(p.Session) > 256 || !utf8.ValidString(p.Session):
		return bad("request.proposal.session", "must be 1-256 bytes of UTF-8")
	case p.SinkID == "" || len(p.SinkID) > 253:
		return bad("request.proposal.sinkID", "must be 1-253 characters")
	case p.Envelope == "" || p.Envelope[0] != '{':
		return bad("request.proposal.envelope", "must be the envelope's canonical JSON")
	case len(p.Calls) < 2 || len(p.Calls) > 4:
		return bad("request.proposal.calls", "a binding moment offers 2 to 4 options")
	}
	for i, c := range p.Calls {
		field := fmt.Sprintf("request.proposal.calls[%d]", i)
		switch {
		case len(validation.IsDNS1123Label(c.Server)) > 0:
			return bad(field+".server", "must be a ToolPolicy server name (a DNS label)")
		case c.Tool == "" || len(c.Tool) > 256:
			return bad(field+".tool", "must be a tool name")
		case len(c.Arguments) == 0 || c.Arguments[0] != '{':
			return bad(field+".arguments", "must be the arguments object")
		}
	}
	return nil
}

// maxRefusalMessage bounds request.refusal.message.
const maxRefusalMessage = 1024

// checkRefusal checks a Refusal: a Review's act and arguments, and a known EF code.
func checkRefusal(req *Request) error {
	r := req.Refusal
	switch {
	case r == nil:
		return bad("request.refusal", "required for operation %s", OperationRefusal)
	case req.Permit != nil:
		return bad("request.permit", "only for operation %s", OperationPermit)
	case !r.Code.Known():
		return bad("request.refusal.code", "must be a known EF code")
	case utf8.RuneCountInString(r.Message) > maxRefusalMessage:
		return bad("request.refusal.message", "at most %d characters", maxRefusalMessage)
	}
	return checkCall(req)
}

// checkPermit checks a Permit: a Review's act and arguments, and the operation the authority
// is to be consumed by.
func checkPermit(req *Request) error {
	if req.Permit == nil {
		return bad("request.permit", "required for operation %s", OperationPermit)
	}
	if req.Refusal != nil {
		return bad("request.refusal", "only for operation %s", OperationRefusal)
	}
	if !validOperationID(req.Permit.OperationID) {
		return bad("request.permit.operationID", "must be 1-%d bytes of UTF-8", journal.MaxIDLength)
	}
	return checkCall(req)
}

// checkCall checks the members of a call under review (Review, Permit and Refusal).
func checkCall(req *Request) error {
	if req.Proposal != nil {
		return bad("request.proposal", "only for operation %s", OperationPropose)
	}
	if req.Consume != nil {
		return bad("request.consume", "only for operation %s", OperationConsume)
	}
	if req.Report != nil {
		return bad("request.report", "only for operation %s", OperationReport)
	}
	if errs := validation.IsDNS1123Label(req.Server); len(errs) > 0 {
		return bad("request.server", "must be a ToolPolicy server name (a DNS label)")
	}
	if len(req.Act) == 0 || req.Act[0] != '{' {
		return bad("request.act", "must be an AgentCandidateAct object")
	}
	if len(req.Arguments) == 0 || req.Arguments[0] != '{' {
		return bad("request.arguments", "must be the arguments object")
	}
	return nil
}

func checkConsume(req *Request) error {
	if len(req.Act) != 0 || len(req.Arguments) != 0 || req.Server != "" {
		return bad("request", "act, arguments and server are only for operation %s", OperationReview)
	}
	if req.Permit != nil || req.Refusal != nil || req.Proposal != nil {
		return bad("request", "permit, refusal and proposal are only for operations %s, %s and %s", OperationPermit, OperationRefusal, OperationPropose)
	}
	if req.Report != nil {
		return bad("request.report", "only for operation %s", OperationReport)
	}
	c := req.Consume
	if c == nil {
		return bad("request.consume", "required for operation %s", OperationConsume)
	}
	if !authority.ValidID(c.AuthorityID) {
		return bad("request.consume.authorityID", "must be an authority ID (%s + 64 lowercase hex)", authority.IDPrefix)
	}
	if !validOperationID(c.OperationID) {
		return bad("request.consume.operationID", "must be 1-%d bytes of UTF-8", journal.MaxIDLength)
	}
	// The namespace is the caller's; any valid one stands in for the check of the rest.
	if err := c.Binding.In("x").Validate(); err != nil {
		return bad("request.consume.binding", "%s", bindingProblem(err))
	}
	return nil
}

// maxActIDBytes bounds an act ID (internal/act MaxIDBytes: candidate_act_id).
const maxActIDBytes = 256

// validActID reports whether id may be a candidate_act_id: non-empty, bounded, valid UTF-8,
// graphic and without spaces (internal/act's rule for ids).
func validActID(id string) bool {
	if id == "" || len(id) > maxActIDBytes || !utf8.ValidString(id) {
		return false
	}
	for _, r := range id {
		if !unicode.IsGraphic(r) || unicode.IsSpace(r) {
			return false
		}
	}
	return true
}

func validOperationID(id string) bool {
	return id != "" && len(id) <= journal.MaxIDLength && utf8.ValidString(id)
}

// checkReport checks a Report: the consumed authority, its operation, an outcome state and the
// evidence digest (never a result).
func checkReport(req *Request) error {
	if len(req.Act) != 0 || len(req.Arguments) != 0 || req.Server != "" {
		return bad("request", "act, arguments and server are only for operation %s", OperationReview)
	}
	if req.Consume != nil {
		return bad("request.consume", "only for operation %s", OperationConsume)
	}
	if req.Permit != nil || req.Refusal != nil || req.Proposal != nil {
		return bad("request", "permit, refusal and proposal are only for operations %s, %s and %s", OperationPermit, OperationRefusal, OperationPropose)
	}
	r := req.Report
	if r == nil {
		return bad("request.report", "required for operation %s", OperationReport)
	}
	if r.ActID != "" && !validActID(r.ActID) {
		return bad("request.report.actID", "must be an act ID: 1-%d bytes of UTF-8, graphic, no spaces", maxActIDBytes)
	}
	if !authority.ValidID(r.AuthorityID) {
		return bad("request.report.authorityID", "must be an authority ID (%s + 64 lowercase hex)", authority.IDPrefix)
	}
	if !validOperationID(r.OperationID) {
		return bad("request.report.operationID", "must be 1-%d bytes of UTF-8", journal.MaxIDLength)
	}
	if !slices.Contains(ReportStates, r.State) {
		return bad("request.report.state", "must be %s, %s or %s", ReportStates[0], ReportStates[1], ReportStates[2])
	}
	switch {
	case r.EvidenceDigest == "" && r.State != v1alpha1.ActStateIndeterminate:
		return bad("request.report.evidenceDigest", "required for %s", r.State)
	case r.EvidenceDigest != "" && !ValidDigest(r.EvidenceDigest):
		return bad("request.report.evidenceDigest", "must be sha256: and 64 lowercase hex digits")
	}
	return nil
}

// ValidDigest reports whether d is sha256:<64 lowercase hex>.
func ValidDigest(d string) bool {
	const p = "sha256:"
	if len(d) != len(p)+64 || d[:len(p)] != p {
		return false
	}
	for _, c := range d[len(p):] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// bindingProblem is authority's validation message without its package prefix.
func bindingProblem(err error) string {
	s := err.Error()
	if p := authority.ErrInvalid.Error() + ": "; len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}

// DecodeResponse parses the service's answer to the request with uid. It accepts exactly one
// ActReview of this group, version and kind with a response for that uid and no request.
func DecodeResponse(body []byte, uid types.UID) (*Response, error) {
	var r ActReview
	if err := decodeStrict(body, &r); err != nil {
		return nil, err
	}
	if err := checkTypeMeta(&r); err != nil {
		return nil, err
	}
	if r.Request != nil {
		return nil, bad("request", "a response must not carry a request")
	}
	if r.Response == nil {
		return nil, bad("response", "required")
	}
	if r.Response.UID != uid {
		return nil, bad("response.uid", "does not match the request")
	}
	return r.Response, nil
}
