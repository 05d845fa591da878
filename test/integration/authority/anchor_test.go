package authority

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/anchor"
	"github.com/actgate/actgate/internal/jcs"
	"github.com/actgate/actgate/internal/receipt"
	"github.com/actgate/actgate/internal/review"
)

// lockedBuffer is a pod's stdout as its log pipeline keeps it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuffer) lines() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	ls := strings.SplitAfter(w.b.String(), "\n")
	return ls[:len(ls)-1] // every record ends in a newline: the last element is empty
}

// anchoredLog is a sidecar's receipt log (mirrored to a stream) whose checkpoints are recorded.
type anchoredLog struct {
	log    *receipt.Log
	pem    string
	stream *lockedBuffer
	mu     sync.Mutex
	cps    []receipt.SignedCheckpoint
}

func openAnchoredLog(t *testing.T, dir string, offer func(receipt.SignedCheckpoint)) *anchoredLog {
	t.Helper()
	signer, err := receipt.LoadOrCreateSigner(filepath.Join(dir, "receipts.key"), filepath.Join(dir, "receipts.pub.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pemBytes, err := os.ReadFile(filepath.Join(dir, "receipts.pub.pem"))
	if err != nil {
		t.Fatal(err)
	}
	a := &anchoredLog{pem: string(pemBytes), stream: &lockedBuffer{}}
	a.log, err = receipt.Open(receipt.Options{Path: filepath.Join(dir, "receipts.jsonl"), Signer: signer, MaxDelay: time.Hour, Mirror: a.stream,
		OnCheckpoint: func(c receipt.SignedCheckpoint) {
			a.mu.Lock()
			a.cps = append(a.cps, c)
			a.mu.Unlock()
			if offer != nil {
				offer(c)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.log.Close() })
	return a
}

// batch appends n receipts and commits them (one checkpoint), returning the checkpoint.
func (a *anchoredLog) batch(t *testing.T, tag string, n int) receipt.SignedCheckpoint {
	t.Helper()
	for i := range n {
		if _, err := a.log.Append(receipt.Receipt{ActID: fmt.Sprintf("%s-%d", tag, i), Tool: "get_invoice",
			ArgumentsDigest: jcs.Digest([]byte(tag + fmt.Sprint(i))), Decision: receipt.DecisionAllow}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.log.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cps[len(a.cps)-1]
}

func (r *rig) receiptAnchor(t *testing.T, uid string) *v1alpha1.ReceiptAnchor {
	t.Helper()
	ra := &v1alpha1.ReceiptAnchor{}
	if err := r.env.Client.Get(context.Background(), client.ObjectKey{Namespace: r.ns, Name: uid}, ra); err != nil {
		t.Fatal(err)
	}
	return ra
}

func wantRefused(t *testing.T, err error, reason review.Reason) {
	t.Helper()
	if !errors.Is(err, anchor.ErrRefused) || !strings.Contains(err.Error(), " "+string(reason)+":") {
		t.Fatalf("post: %v, want a refusal %s", err, reason)
	}
}

// TestReceiptAnchor: a sidecar's Anchorer, fed by its receipt log, records the log's key and
// newest checkpoint in the ReceiptAnchor named by its pod's UID, through the authority service
// as the pod (its bound token). Another pod's token writes only its own anchor; an unbound token
// writes none; a lower seq, a fork, another key and a bad signature are refused with their
// reasons and change nothing. A restarted sidecar container reopens the log with the same key
// and its anchor goes on. After the pod is deleted the anchor is still there, and the pod's
// stream verifies against it, unless it was cut before the anchored checkpoint.
func TestReceiptAnchor(t *testing.T) {
	r := newRig(t, rigOptions{})
	ctx := context.Background()
	mux := http.NewServeMux()
	mux.Handle(review.Path, r.svc)
	mux.Handle(review.AnchorPath, r.svc.AnchorHandler())
	r.serveHandlerTLS(t, mux)
	pod0 := &corev1.Pod{}
	if err := r.env.Client.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: "agent-0"}, pod0); err != nil {
		t.Fatal(err)
	}
	uid0 := string(pod0.UID)
	client0 := r.client(r.agentTk)

	// The sidecar: its log offers each checkpoint to an Anchorer posting as agent-0.
	var anch *anchor.Anchorer
	dir := t.TempDir()
	sidecar := openAnchoredLog(t, dir, func(c receipt.SignedCheckpoint) { anch.Offer(c) })
	var err error
	if anch, err = anchor.New(anchor.Options{Post: client0.PostAnchor, PublicKeyPEM: sidecar.pem, MinBackoff: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { anch.Run(runCtx); close(done) }()
	cp3 := sidecar.batch(t, "a", 3)
	cp6 := sidecar.batch(t, "b", 3)
	deadline := time.Now().Add(10 * time.Second)
	for anch.Anchored() != cp6.Seq && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	<-done
	if got := anch.Anchored(); got != 6 {
		t.Fatalf("anchored seq %d, want 6", got)
	}
	ra := r.receiptAnchor(t, uid0)
	key, err := anchor.ParsePublicKey(ra.Spec.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	sidecarKey, _ := anchor.ParsePublicKey(sidecar.pem)
	if ra.Spec.PodName != "agent-0" || ra.Spec.PodUID != uid0 || !key.Equal(sidecarKey) || ra.Spec.KeyID != cp6.KeyID {
		t.Fatalf("anchor spec %+v", ra.Spec)
	}
	if want := anchor.ToAPI(cp6); ra.Status.Checkpoint == nil || *ra.Status.Checkpoint != want {
		t.Fatalf("anchored %+v, want %+v", ra.Status.Checkpoint, want)
	}
	rv := ra.ResourceVersion
	unchanged := func(why string) {
		t.Helper()
		if got := r.receiptAnchor(t, uid0); got.ResourceVersion != rv || got.Status.Checkpoint.Seq != 6 {
			t.Fatalf("%s: agent-0's anchor changed: rv %s→%s, seq %d", why, rv, got.ResourceVersion, got.Status.Checkpoint.Seq)
		}
	}

	// The same checkpoint again is no write; a lower one is refused.
	if err := client0.PostAnchor(ctx, sidecar.pem, anchor.ToAPI(cp6)); err != nil {
		t.Fatalf("repeat: %v", err)
	}
	unchanged("repeat")
	wantRefused(t, client0.PostAnchor(ctx, sidecar.pem, anchor.ToAPI(cp3)), review.ReasonAnchorSizeDecreased)
	unchanged("lower seq")

	// Another chain under the same key, with the same seq: a fork.
	forkDir := t.TempDir()
	for _, f := range []string{"receipts.key", "receipts.pub.pem"} {
		b, _ := os.ReadFile(filepath.Join(dir, f))
		if err := os.WriteFile(filepath.Join(forkDir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	fork := openAnchoredLog(t, forkDir, nil)
	fork6 := fork.batch(t, "fork", 6)
	wantRefused(t, client0.PostAnchor(ctx, sidecar.pem, anchor.ToAPI(fork6)), review.ReasonAnchorForked)
	unchanged("fork")

	// A checkpoint altered after signing, and a log under another key.
	altered := anchor.ToAPI(cp6)
	altered.Seq = 7
	wantRefused(t, client0.PostAnchor(ctx, sidecar.pem, altered), review.ReasonAnchorBadSignature)
	other := openAnchoredLog(t, t.TempDir(), nil)
	other9 := other.batch(t, "other", 9)
	wantRefused(t, client0.PostAnchor(ctx, other.pem, anchor.ToAPI(other9)), review.ReasonAnchorKeyChanged)
	unchanged("bad signature, other key")

	// Another pod of the same service account and policy posts agent-0's next checkpoint: it
	// lands in its own anchor, never in agent-0's.
	cp9 := sidecar.batch(t, "c", 3)
	pod1 := r.pod(t, "agent", "agent-1", map[string]string{"app.kubernetes.io/name": agentLabel})
	if err := r.client(r.token(t, "agent", pod1, audience)).PostAnchor(ctx, sidecar.pem, anchor.ToAPI(cp9)); err != nil {
		t.Fatalf("agent-1: %v", err)
	}
	if got := r.receiptAnchor(t, string(pod1.UID)); got.Spec.PodName != "agent-1" || got.Status.Checkpoint.Seq != 9 {
		t.Fatalf("agent-1's anchor %+v", got)
	}
	unchanged("another pod's post")

	// A token bound to no pod anchors nothing.
	err = r.client(r.token(t, "agent", nil, audience)).PostAnchor(ctx, sidecar.pem, anchor.ToAPI(cp9))
	wantRefused(t, err, review.ReasonUnboundToken)
	var list v1alpha1.ReceiptAnchorList
	if err := r.env.Client.List(ctx, &list, client.InNamespace(r.ns)); err != nil || len(list.Items) != 2 {
		t.Fatalf("%d anchors (%v), want agent-0's and agent-1's", len(list.Items), err)
	}
	unchanged("unbound token")

	// The sidecar container restarts: the log reopens from the same emptyDir with the same key,
	// offers its last checkpoint (9) to the new Anchorer, and goes on; the anchor follows.
	if err := sidecar.log.Close(); err != nil {
		t.Fatal(err)
	}
	var anch2 *anchor.Anchorer
	if anch2, err = anchor.New(anchor.Options{Post: client0.PostAnchor, PublicKeyPEM: sidecar.pem, MinBackoff: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	restarted := openAnchoredLog(t, dir, anch2.Offer)
	runCtx, stop = context.WithCancel(ctx)
	done = make(chan struct{})
	go func() { anch2.Run(runCtx); close(done) }()
	cp12 := restarted.batch(t, "d", 3)
	deadline = time.Now().Add(10 * time.Second)
	for anch2.Anchored() != cp12.Seq && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	<-done
	if got := r.receiptAnchor(t, uid0); got.Status.Checkpoint.Seq != 12 || got.Spec.PublicKey != ra.Spec.PublicKey {
		t.Fatalf("after the restart the anchor holds seq %d", got.Status.Checkpoint.Seq)
	}
	restarted.batch(t, "e", 3) // committed, signed, in the stream, not anchored

	// The pod goes; its anchor stays, and is what kubectl prints.
	if err := r.env.Client.Delete(ctx, pod0, &client.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	for {
		if err := r.env.Client.Get(ctx, client.ObjectKeyFromObject(pod0), &corev1.Pod{}); client.IgnoreNotFound(err) == nil && err != nil {
			break
		}
		if time.Now().After(deadline.Add(10 * time.Second)) {
			t.Fatal("pod not deleted")
		}
		time.Sleep(20 * time.Millisecond)
	}
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(v1alpha1.GroupVersion.String())
	u.SetKind("ReceiptAnchor")
	if err := r.env.Client.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: uid0}, u); err != nil {
		t.Fatalf("the anchor did not outlive its pod: %v", err)
	}
	asKubectl, err := json.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := anchor.ParseObject(asKubectl)
	if err != nil {
		t.Fatal(err)
	}

	// The pod's output: the first run's records (r r r cp3 r r r cp6 r r r cp9), then the
	// restarted run's (its last signed segment again, r r r cp9, then r r r cp12, r r r cp15).
	first, second := sidecar.stream.lines(), restarted.stream.lines()
	if len(first) != 12 || len(second) != 12 {
		t.Fatalf("streams of %d and %d lines, want 12 and 12", len(first), len(second))
	}
	lines := append(append([]string(nil), first...), second...)
	verify := func(ls []string) error {
		_, err := anchor.VerifyStream(strings.NewReader("sidecar starting\n"+strings.Join(ls, "")), obj, receipt.StreamOptions{})
		return err
	}
	if err := verify(lines); err != nil {
		t.Fatalf("intact stream: %v", err)
	}
	// Cut at checkpoint 3 the stream verifies on its own, but not against the anchor.
	if _, err := receipt.VerifyStream(strings.NewReader(strings.Join(lines[:4], "")), obj.Key.Verifier, receipt.StreamOptions{}); err != nil {
		t.Fatalf("the cut stream alone: %v", err)
	}
	var ve *receipt.VerifyError
	if err := verify(lines[:4]); !errors.As(err, &ve) || !ve.Has(receipt.CodeAnchorMissing) {
		t.Fatalf("stream cut before the anchored checkpoint: %v, want %s", err, receipt.CodeAnchorMissing)
	}
	// Losing the restarted run's output (the stream ends at 9, a checkpoint) is caught too.
	if err := verify(first); !errors.As(err, &ve) || !ve.Has(receipt.CodeAnchorMissing) {
		t.Fatalf("stream without the restarted run: %v, want %s", err, receipt.CodeAnchorMissing)
	}
	// A cut after the anchored checkpoint, at a later checkpoint, is what an anchor cannot see:
	// the restarted run's last batch (to 15) was never anchored.
	if err := verify(lines[:len(lines)-4]); err != nil {
		t.Fatalf("stream cut at the anchored checkpoint: %v", err)
	}
}
