package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/review"
	"github.com/actgate/actgate/internal/tracing"
)

// ServeHTTP answers one ActReview POSTed to review.Path. The response body is always an
// ActReview with the request's uid (when it could be read) and allowed false unless the review
// allowed the call; the status is 200 for a decision, 400 for a malformed review, 401 when the
// caller is not authenticated, 403 when its pod is not found or not governed by exactly one
// ToolPolicy or its sidecar's review protocol level is not served (review.ReasonSidecarTooOld,
// review.ReasonSidecarTooNew), 503 when the API server or the store failed or was too slow.
// Every answer states the service's level (review.LevelHeader).
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	ctx := r.Context()
	if s.tracer != nil {
		ctx = tracing.Extract(ctx, r.Header)
	}
	ctx, span := tracing.Start(ctx, s.tracer, "actgate.authority.review", trace.SpanKindServer)
	defer span.End()
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	op, uid, o := s.handle(ctx, r)
	o.resp.UID = uid
	if span.IsRecording() {
		span.SetAttributes(tracing.AttrOperation.String(string(op)), tracing.AttrAllowed.Bool(o.resp.Allowed),
			tracing.AttrDecision.String(string(o.resp.Decision)), tracing.AttrCode.String(string(o.resp.Code)),
			attribute.String("actgate.review.reason", string(o.resp.Reason)), attribute.Int("http.response.status_code", o.status))
		if o.resp.Act != "" {
			span.SetAttributes(attribute.String("actgate.act.name", o.resp.Act))
		}
	}
	s.metrics.observe(op, o.resp, time.Since(start))
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	review.SetLevel(w.Header(), review.Level)
	w.WriteHeader(o.status)
	_ = json.NewEncoder(w).Encode(review.ActReview{
		TypeMeta: metav1.TypeMeta{APIVersion: review.APIVersion, Kind: review.Kind},
		Response: &o.resp,
	})
}

// levelRefusal is the refusal of a request whose sidecar's review protocol level this service
// does not serve (docs/architecture.md "Version skew between sidecars and the authority
// service"), or nil. A request without review.LevelHeader is level review.MissingSidecarLevel.
func levelRefusal(r *http.Request) *outcome {
	level, err := review.SidecarLevel(r.Header)
	if err != nil {
		o := deny(http.StatusBadRequest, ef.EFPolicyDenied, review.ReasonBadRequest,
			"The "+review.LevelHeader+" header is malformed: one review protocol level, a number, is expected.")
		return &o
	}
	switch review.CheckSidecarLevel(level) {
	case review.ReasonSidecarTooOld:
		o := deny(http.StatusForbidden, ef.EFPolicyDenied, review.ReasonSidecarTooOld, fmt.Sprintf(
			"This sidecar speaks review protocol level %d; this authority service serves levels %d to %d: restart the pod to get the current sidecar.",
			level, review.MinSidecarLevel, review.Level))
		return &o
	case review.ReasonSidecarTooNew:
		o := deny(http.StatusForbidden, ef.EFPolicyDenied, review.ReasonSidecarTooNew, fmt.Sprintf(
			"This sidecar speaks review protocol level %d; this authority service serves levels %d to %d: upgrade the control plane.",
			level, review.MinSidecarLevel, review.Level))
		return &o
	}
	return nil
}

func (s *Service) handle(ctx context.Context, r *http.Request) (review.Operation, types.UID, outcome) {
	if r.Method != http.MethodPost {
		return "", "", deny(http.StatusMethodNotAllowed, ef.EFPolicyDenied, review.ReasonBadRequest, "ActReviews are POSTed.")
	}
	if r.URL.Path != review.Path {
		return "", "", deny(http.StatusNotFound, ef.EFPolicyDenied, review.ReasonBadRequest, "ActReviews are POSTed to "+review.Path+".")
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return "", "", deny(http.StatusUnsupportedMediaType, ef.EFPolicyDenied, review.ReasonBadRequest, "An ActReview is application/json.")
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, review.MaxReviewBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return "", "", deny(http.StatusRequestEntityTooLarge, ef.EFPolicyDenied, review.ReasonBadRequest, "The ActReview is too large.")
		}
		return "", "", deny(http.StatusBadRequest, ef.EFPolicyDenied, review.ReasonBadRequest, "The ActReview could not be read.")
	}
	rv, uid, err := review.DecodeRequest(body)
	// The level is checked before the body's shape: a sidecar of another level may send members
	// this service does not know, and is told its level is the problem (the uid, when it could
	// be read, is echoed so that the sidecar reads the refusal).
	if refused := levelRefusal(r); refused != nil {
		if uid == "" {
			uid = review.RequestUID(body)
		}
		return "", uid, *refused
	}
	if err != nil {
		msg := "The ActReview is malformed."
		var fe *review.FieldError
		if errors.As(err, &fe) {
			msg = "The ActReview is malformed: " + fe.Field + ": " + fe.Detail + "."
		}
		return "", uid, deny(http.StatusBadRequest, ef.EFPolicyDenied, review.ReasonBadRequest, msg)
	}
	req := rv.Request
	token, ok := bearerToken(r)
	if !ok {
		return req.Operation, uid, deny(http.StatusUnauthorized, ef.EFPolicyDenied, review.ReasonUnauthenticated, "A bearer token is required.")
	}
	c, refused := s.authenticate(ctx, token)
	if refused != nil {
		return req.Operation, uid, *refused
	}
	if refused := s.agentIdentity(ctx, c, r, req.Operation); refused != nil {
		return req.Operation, uid, *refused
	}
	switch req.Operation {
	case review.OperationConsume:
		return req.Operation, uid, s.consume(ctx, c, req)
	case review.OperationReport:
		return req.Operation, uid, s.report(ctx, c, req)
	case review.OperationPermit:
		return req.Operation, uid, s.permit(ctx, c, req)
	case review.OperationRefusal:
		return req.Operation, uid, s.refusal(ctx, c, req)
	case review.OperationPropose:
		return req.Operation, uid, s.propose(ctx, c, req)
	default:
		return req.Operation, uid, s.review(ctx, c, req)
	}
}
