package service

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/anchor"
	"github.com/actgate/actgate/internal/receipt"
	"github.com/actgate/actgate/internal/review"
)

// anchorAttempts bounds the compare-and-swap rounds of one anchor request when other writers
// (a concurrent request of the same pod) move the object between read and write.
const anchorAttempts = 4

// AnchorHandler answers POST review.AnchorPath: it records the checkpoint in the body in the
// ReceiptAnchor of the pod the bearer token is bound to, named by the pod's UID, in the pod's
// namespace. The pod comes from the token (TokenReview, then the pod by name and UID), never
// from the body, so a pod anchors its own log and no other.
//
// The first request creates the anchor with the request's public key; later ones must carry
// the same key (AnchorKeyChanged otherwise). The checkpoint's signature is verified under the
// anchored key before anything is written, and the anchored checkpoint moves only forward, by
// compare-and-swap on the object's resourceVersion: a lower seq is AnchorSizeDecreased, the
// same seq with another checkpoint AnchorForked, the same checkpoint AnchorUnchanged (200).
//
// Every answer is a metav1.Status stating the service's review.LevelHeader: 200 (Anchored,
// AnchorUnchanged), 400 (BadRequest, AnchorBadSignature, a malformed level header), 401 (not
// authenticated), 403 (pod not found, or not readable where actgate does not govern; a
// sidecar level not served), 409 (the refusals above), 413, 415, 503 (API server failed or
// too slow; worth retrying).
func (s *Service) AnchorHandler() http.Handler { return http.HandlerFunc(s.serveAnchor) }

func (s *Service) serveAnchor(w http.ResponseWriter, r *http.Request) {
	review.SetLevel(w.Header(), review.Level)
	if r.Method != http.MethodPost {
		writeStatus(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "Receipt anchors are POSTed.")
		return
	}
	if r.URL.Path != review.AnchorPath {
		writeStatus(w, http.StatusNotFound, "NotFound", "Receipt anchors are POSTed to "+review.AnchorPath+".")
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeStatus(w, http.StatusUnsupportedMediaType, string(review.ReasonBadRequest), "An anchor request is application/json.")
		return
	}
	if o := levelRefusal(r); o != nil {
		writeStatus(w, o.status, string(o.resp.Reason), o.resp.Message)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, review.MaxAnchorBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeStatus(w, http.StatusRequestEntityTooLarge, string(review.ReasonBadRequest), "The anchor request is too large.")
			return
		}
		writeStatus(w, http.StatusBadRequest, string(review.ReasonBadRequest), "The anchor request could not be read.")
		return
	}
	_, key, sc, err := review.DecodeAnchorRequest(body)
	if err != nil {
		reason := review.ReasonBadRequest
		var fe *review.FieldError
		msg := "The anchor request is malformed."
		if errors.As(err, &fe) {
			msg = "The anchor request is malformed: " + fe.Field + ": " + fe.Detail + "."
			if strings.HasPrefix(fe.Detail, string(review.ReasonAnchorBadSignature)) {
				reason = review.ReasonAnchorBadSignature
			}
		}
		writeStatus(w, http.StatusBadRequest, string(reason), msg)
		return
	}
	token, ok := bearerToken(r)
	if !ok {
		writeStatus(w, http.StatusUnauthorized, string(review.ReasonUnauthenticated), "A bearer token is required.")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
	defer cancel()
	c, refused := s.authenticate(ctx, token)
	// A pod found with the token's UID may anchor its log whether or not exactly one policy
	// governs it now: its receipts are evidence either way.
	if refused != nil && (c == nil || c.podUID == "" || refused.status != http.StatusForbidden) {
		writeStatus(w, refused.status, string(refused.resp.Reason), refused.resp.Message)
		return
	}
	status, reason, msg := s.anchor(ctx, c, key, sc)
	if status != http.StatusOK {
		s.log.Info("receipt anchor refused", "namespace", c.namespace, "pod", c.podName, "seq", sc.Seq, "head", sc.Head, "reason", reason)
	} else {
		s.log.V(1).Info("receipt anchor", "namespace", c.namespace, "pod", c.podName, "seq", sc.Seq, "head", sc.Head, "reason", reason)
	}
	writeAnchorStatus(w, status, reason, msg)
}

// anchor moves the caller's ReceiptAnchor to sc, creating it on the first call.
func (s *Service) anchor(ctx context.Context, c *caller, key anchor.PublicKey, sc receipt.SignedCheckpoint) (int, review.Reason, string) {
	want := anchor.ToAPI(sc)
	objKey := client.ObjectKey{Namespace: c.namespace, Name: c.podUID}
	for range anchorAttempts {
		ra := &v1alpha1.ReceiptAnchor{}
		// A read from the API server (by quorum), not a cache: the compare-and-swap below must
		// start from the newest object.
		err := s.c.Get(ctx, objKey, ra)
		if apierrors.IsNotFound(err) {
			ra = &v1alpha1.ReceiptAnchor{
				ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: c.podUID},
				Spec: v1alpha1.ReceiptAnchorSpec{PodName: c.podName, PodUID: c.podUID,
					PublicKey: string(publicKeyPEM(key)), KeyID: sc.KeyID},
			}
			err = s.c.Create(ctx, ra, client.FieldOwner(s.manager))
			if apierrors.IsAlreadyExists(err) {
				continue
			}
		}
		if err != nil {
			o := apiFailure(ctx, "read or create the pod's ReceiptAnchor", err)
			return o.status, o.resp.Reason, o.resp.Message
		}
		anchored, err := anchor.ParsePublicKey(ra.Spec.PublicKey)
		if err != nil || !anchored.Equal(key) || ra.Spec.KeyID != sc.KeyID || ra.Spec.PodUID != c.podUID || ra.Spec.PodName != c.podName {
			return http.StatusConflict, review.ReasonAnchorKeyChanged,
				"The pod's ReceiptAnchor holds another receipt-log key: a log keeps its key for the pod's life."
		}
		if err := receipt.VerifyCheckpoint(anchored.Verifier, sc); err != nil {
			return http.StatusBadRequest, review.ReasonAnchorBadSignature, "The checkpoint's signature does not verify under the anchored key."
		}
		if cur := ra.Status.Checkpoint; cur != nil {
			switch {
			case cur.Seq > want.Seq:
				return http.StatusConflict, review.ReasonAnchorSizeDecreased,
					"The pod's ReceiptAnchor holds a checkpoint with a higher seq: a receipt log never shrinks."
			case cur.Seq == want.Seq && *cur == want:
				return http.StatusOK, review.ReasonAnchorUnchanged, "The pod's ReceiptAnchor already holds this checkpoint."
			case cur.Seq == want.Seq:
				return http.StatusConflict, review.ReasonAnchorForked,
					"The pod's ReceiptAnchor holds another checkpoint with the same seq: two chains under one key."
			}
		}
		ra.Status.Checkpoint = &want
		err = s.c.Status().Update(ctx, ra, client.FieldOwner(s.manager))
		switch {
		case err == nil:
			return http.StatusOK, review.ReasonAnchored, "The checkpoint is anchored."
		case apierrors.IsConflict(err), apierrors.IsInvalid(err):
			// Moved since the read (the API server's own rule refuses a lower seq): read again
			// and decide on the newer object.
			continue
		default:
			o := apiFailure(ctx, "update the pod's ReceiptAnchor", err)
			return o.status, o.resp.Reason, o.resp.Message
		}
	}
	return http.StatusServiceUnavailable, review.ReasonUnavailable, "The pod's ReceiptAnchor kept changing under concurrent writes; try again."
}

// publicKeyPEM is the canonical PEM of a key, as the anchor stores it.
func publicKeyPEM(k anchor.PublicKey) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: k.DER})
}

// writeAnchorStatus answers with a metav1.Status, Success for 200.
func writeAnchorStatus(w http.ResponseWriter, code int, reason review.Reason, msg string) {
	if code != http.StatusOK {
		writeStatus(w, code, string(reason), msg)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(metav1.Status{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
		Status:   metav1.StatusSuccess, Code: int32(code), Reason: metav1.StatusReason(reason), Message: msg,
	})
}
