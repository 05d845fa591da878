package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/logfield"
	"github.com/actgate/actgate/internal/review"
	"github.com/actgate/actgate/internal/tooldef"
)

// Pinned tool definitions in Kubernetes (docs/architecture.md "Pinned tool definitions"): the
// sidecar is the one that sees an upstream's tools/list, but it has no API rights; the service
// authenticates it as its pod, finds the pod's governing ToolPolicy with the rule of every
// review, and writes what the sidecar saw into the policy's status by compare-and-swap on the
// resourceVersion. The manager's controller keeps status.toolPins and status.toolChanges when
// it writes its conditions (it patches from the status it read).

// toolPinAttempts bounds the compare-and-swap rounds of one report.
const toolPinAttempts = 4

// maxStatusToolPins is the API's bound on status.toolPins and status.toolChanges (each).
const maxStatusToolPins = 256

// ReasonToolDefinitionChanged is the reason of the Event on a ToolPolicy whose pinned tool an
// upstream lists with a changed definition.
const ReasonToolDefinitionChanged = "ToolDefinitionChanged"

// ToolPinHandler answers POST review.ToolPinPath: a first use is recorded in status.toolPins
// unless a pin is (200 ToolPinRecorded or ToolPinExists, with the pin held); a changed
// definition is recorded in status.toolChanges and announced with a Warning Event on the
// policy (200 ToolChangeRecorded). A tool the governing policy does not pin that way is 409
// ToolNotPinned; 400 for a malformed report, 401, 403 and 503 as the other endpoints. Every
// answer is a review.ToolPinAnswer.
func (s *Service) ToolPinHandler() http.Handler { return http.HandlerFunc(s.serveToolPin) }

func (s *Service) serveToolPin(w http.ResponseWriter, r *http.Request) {
	review.SetLevel(w.Header(), review.Level)
	answer := func(code int, reason review.Reason, msg string, pin *v1alpha1.RecordedToolPin) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(review.ToolPinAnswer{
			TypeMeta: metav1.TypeMeta{APIVersion: review.APIVersion, Kind: review.ToolPinAnswerKind},
			Reason:   reason, Message: msg, Pin: pin,
		})
	}
	if r.Method != http.MethodPost {
		answer(http.StatusMethodNotAllowed, "MethodNotAllowed", "Tool pin reports are POSTed.", nil)
		return
	}
	if r.URL.Path != review.ToolPinPath {
		answer(http.StatusNotFound, "NotFound", "Tool pin reports are POSTed to "+review.ToolPinPath+".", nil)
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		answer(http.StatusUnsupportedMediaType, review.ReasonBadRequest, "A tool pin report is application/json.", nil)
		return
	}
	if o := levelRefusal(r); o != nil {
		answer(o.status, o.resp.Reason, o.resp.Message, nil)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, review.MaxToolPinBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			answer(http.StatusRequestEntityTooLarge, review.ReasonBadRequest, "The tool pin report is too large.", nil)
			return
		}
		answer(http.StatusBadRequest, review.ReasonBadRequest, "The tool pin report could not be read.", nil)
		return
	}
	rep, err := review.DecodeToolPinReport(body)
	if err != nil {
		msg := "The tool pin report is malformed."
		var fe *review.FieldError
		if errors.As(err, &fe) {
			msg = "The tool pin report is malformed: " + fe.Field + ": " + fe.Detail + "."
		}
		answer(http.StatusBadRequest, review.ReasonBadRequest, msg, nil)
		return
	}
	token, ok := bearerToken(r)
	if !ok {
		answer(http.StatusUnauthorized, review.ReasonUnauthenticated, "A bearer token is required.", nil)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
	defer cancel()
	c, refused := s.authenticate(ctx, token)
	if refused != nil {
		answer(refused.status, refused.resp.Reason, refused.resp.Message, nil)
		return
	}
	compiled, notServed := s.serve(c)
	if notServed != nil {
		answer(http.StatusConflict, notServed.resp.Reason, notServed.resp.Message, nil)
		return
	}
	pin, ok := compiled.ToolPin(rep.Server, rep.Tool)
	if !ok || (!rep.Changed && (!pin.OnFirstUse || pin.Digest != "")) {
		answer(http.StatusConflict, review.ReasonToolNotPinned, fmt.Sprintf("ToolPolicy %s does not pin tool %s on server %s on first use.",
			c.policy.Name, rep.Tool, rep.Server), nil)
		return
	}
	code, reason, msg, held := s.recordToolPin(ctx, c, rep)
	s.log.Info("Tool pin report", "namespace", c.namespace, "pod", c.podName, "policy", c.policy.Name, "server", rep.Server,
		"tool", logfield.Bound(rep.Tool), "sha256", rep.SHA256, "changed", rep.Changed, "reason", reason)
	answer(code, reason, msg, held)
}

// recordToolPin writes rep into the governing policy's status by compare-and-swap.
func (s *Service) recordToolPin(ctx context.Context, c *caller, rep *review.ToolPinReport) (int, review.Reason, string, *v1alpha1.RecordedToolPin) {
	now := metav1.NewTime(s.now().UTC().Truncate(1e9))
	rec := v1alpha1.RecordedToolPin{Server: rep.Server, Tool: rep.Tool, SHA256: rep.SHA256, Members: rep.Members, AcceptedAt: now}
	key := client.ObjectKeyFromObject(c.policy)
	for range toolPinAttempts {
		tp := &v1alpha1.ToolPolicy{}
		// A quorum read: the compare-and-swap must start from the newest status.
		if err := s.c.Get(ctx, key, tp); err != nil {
			o := apiFailure(ctx, "read the ToolPolicy", err)
			return o.status, o.resp.Reason, o.resp.Message, nil
		}
		if tp.UID != c.policy.UID {
			return http.StatusConflict, review.ReasonPolicyNotReady, "The governing ToolPolicy was replaced; report again.", nil
		}
		var accepted *v1alpha1.RecordedToolPin
		if i := findPin(tp.Status.ToolPins, rep.Server, rep.Tool); i >= 0 {
			accepted = tp.Status.ToolPins[i].DeepCopy()
		}
		if !rep.Changed {
			if accepted != nil {
				return http.StatusOK, review.ReasonToolPinExists, "A pin is already recorded for the tool.", accepted
			}
			if len(tp.Status.ToolPins) >= maxStatusToolPins {
				return http.StatusConflict, review.ReasonToolPinsFull, fmt.Sprintf("ToolPolicy %s holds %d tool pins, its bound.", tp.Name, maxStatusToolPins), nil
			}
			rec.AcceptedBy = "first-use"
			tp.Status.ToolPins = append(tp.Status.ToolPins, rec)
		} else {
			if accepted != nil && accepted.SHA256 == rep.SHA256 {
				// Accepted since the sidecar saw the change: nothing is pending.
				return http.StatusOK, review.ReasonToolChangeRecorded, "The definition is the accepted one.", nil
			}
			i := findPin(tp.Status.ToolChanges, rep.Server, rep.Tool)
			switch {
			case i >= 0 && tp.Status.ToolChanges[i].SHA256 == rep.SHA256:
				return http.StatusOK, review.ReasonToolChangeRecorded, "The change is already recorded.", nil
			case i >= 0:
				tp.Status.ToolChanges[i] = rec
			case len(tp.Status.ToolChanges) >= maxStatusToolPins:
				return http.StatusConflict, review.ReasonToolPinsFull, fmt.Sprintf("ToolPolicy %s holds %d tool changes, its bound.", tp.Name, maxStatusToolPins), nil
			default:
				tp.Status.ToolChanges = append(tp.Status.ToolChanges, rec)
			}
		}
		err := s.c.Status().Update(ctx, tp, client.FieldOwner(s.manager))
		switch {
		case err == nil:
		case apierrors.IsConflict(err):
			continue
		default:
			o := apiFailure(ctx, "update the ToolPolicy's status", err)
			return o.status, o.resp.Reason, o.resp.Message, nil
		}
		if !rep.Changed {
			return http.StatusOK, review.ReasonToolPinRecorded, "The first definition is recorded.", &rec
		}
		s.toolChangedEvent(ctx, tp, accepted, rep)
		return http.StatusOK, review.ReasonToolChangeRecorded, "The changed definition is recorded for an operator to accept.", nil
	}
	return http.StatusServiceUnavailable, review.ReasonUnavailable, "The ToolPolicy kept changing under concurrent writes; report again.", nil
}

func findPin(pins []v1alpha1.RecordedToolPin, server, tool string) int {
	for i, p := range pins {
		if p.Server == server && p.Tool == tool {
			return i
		}
	}
	return -1
}

// toolChangedEvent creates a Warning Event on the policy naming the server, the tool, the
// changed members and the digests (never the definition's text). It is written once per
// recorded change (the status write above is the compare-and-swap that elects its writer);
// a failure is logged, the change stays recorded in status.
func (s *Service) toolChangedEvent(ctx context.Context, tp *v1alpha1.ToolPolicy, accepted *v1alpha1.RecordedToolPin, rep *review.ToolPinReport) {
	from, changed := "none accepted", "members unknown"
	if accepted != nil {
		from = accepted.SHA256
		if m := tooldef.Changed(accepted.Members, rep.Members); len(m) > 0 {
			changed = strings.Join(m, ", ")
		}
	}
	msg := fmt.Sprintf("Server %s lists tool %s with a changed definition (%s): %s -> %s. The tool is hidden and its calls refused "+
		"(EF_TOOL_CHANGED) until accepted: kubectl actgate tools accept %s --server %s -n %s",
		rep.Server, logfield.Bound(rep.Tool), changed, from, rep.SHA256, rep.Tool, rep.Server, tp.Namespace)
	h := sha256.Sum256([]byte(rep.Server + "\x00" + rep.Tool + "\x00" + rep.SHA256))
	now := metav1.NewTime(s.now())
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: tp.Namespace, Name: tp.Name + ".toolchange." + hex.EncodeToString(h[:8])},
		InvolvedObject: corev1.ObjectReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "ToolPolicy", Namespace: tp.Namespace,
			Name: tp.Name, UID: tp.UID, ResourceVersion: tp.ResourceVersion},
		Reason: ReasonToolDefinitionChanged, Message: msg, Type: corev1.EventTypeWarning,
		Source:         corev1.EventSource{Component: "actgate-authority"},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		ReportingController: "actgate.io/authority", ReportingInstance: s.manager,
	}
	if err := s.c.Create(ctx, ev); err != nil && !apierrors.IsAlreadyExists(err) {
		s.log.Error(err, "Creating the ToolDefinitionChanged Event failed; the change is recorded in status.toolChanges", "policy", tp.Name)
	}
}
