package anchor

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/jcs"
	"github.com/actgate/actgate/internal/receipt"
)

func testKey(t testing.TB, seed string) (signature.SignerVerifier, string) {
	t.Helper()
	s := sha256.Sum256([]byte(seed))
	sv, err := signature.LoadED25519SignerVerifier(ed25519.NewKeyFromSeed(s[:]))
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := sv.PublicKey()
	pemBytes, err := cryptoutils.MarshalPublicKeyToPEM(pub)
	if err != nil {
		t.Fatal(err)
	}
	return sv, string(pemBytes)
}

func signed(t testing.TB, sv signature.SignerVerifier, seq uint64) receipt.SignedCheckpoint {
	t.Helper()
	pub, _ := sv.PublicKey()
	id, _ := receipt.KeyID(pub)
	c := receipt.Checkpoint{Type: receipt.CheckpointType, Seq: seq, PrevSeq: seq - 1, Head: jcs.Digest([]byte(fmt.Sprint(seq))),
		Time: time.Date(2026, 12, 1, 13, 0, 0, int(seq), time.UTC), KeyID: id}
	body, err := c.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	sig, err := sv.SignMessage(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return receipt.SignedCheckpoint{Checkpoint: c, Signature: sig}
}

// value reads a counter or gauge.
func value(c prometheus.Metric) float64 {
	var m dto.Metric
	_ = c.Write(&m)
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

func TestToAPIFromAPIRoundTrip(t *testing.T) {
	sv, _ := testKey(t, "log")
	for _, seq := range []uint64{1, 7, 1000, 1<<53 - 1} {
		sc := signed(t, sv, seq)
		back, err := FromAPI(ToAPI(sc))
		if err != nil {
			t.Fatal(err)
		}
		if err := receipt.VerifyCheckpoint(sv, back); err != nil {
			t.Fatalf("seq %d: %v", seq, err)
		}
	}
}

// post is a scripted authority service: it answers each post with the next error of script
// (nil once the script is spent) and records the seqs posted.
type post struct {
	mu      sync.Mutex
	script  []error
	seqs    []int64
	block   chan struct{} // when set, each post waits on it
	entered chan struct{}
}

func (p *post) fn(ctx context.Context, pemText string, cp v1alpha1.AnchoredCheckpoint) error {
	p.mu.Lock()
	p.seqs = append(p.seqs, cp.Seq)
	var err error
	if len(p.script) > 0 {
		err, p.script = p.script[0], p.script[1:]
	}
	block, entered := p.block, p.entered
	p.mu.Unlock()
	if entered != nil {
		entered <- struct{}{}
	}
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return err
}

func (p *post) posted() []int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int64(nil), p.seqs...)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func start(t *testing.T, a *Anchorer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// While a post is in flight, newer checkpoints replace each other: only the newest is posted
// next. Offer never waits for the post.
func TestAnchorerCoalesces(t *testing.T) {
	sv, pemText := testKey(t, "log")
	p := &post{block: make(chan struct{}), entered: make(chan struct{}, 16)}
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Options{Post: p.fn, PublicKeyPEM: pemText, Metrics: m, Log: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	start(t, a)
	a.Offer(signed(t, sv, 1))
	<-p.entered // post of 1 in flight, blocked
	began := time.Now()
	for seq := uint64(2); seq <= 50; seq++ {
		a.Offer(signed(t, sv, seq))
	}
	a.Offer(signed(t, sv, 10)) // older than the newest waiting: dropped
	if d := time.Since(began); d > time.Second {
		t.Errorf("50 offers took %v while a post was blocked", d)
	}
	close(p.block)
	waitFor(t, "anchored 50", func() bool { return a.Anchored() == 50 })
	if got := p.posted(); len(got) != 2 || got[0] != 1 || got[1] != 50 {
		t.Fatalf("posted %v, want [1 50]", got)
	}
	if v := value(m.anchored); v != 50 {
		t.Errorf("anchored gauge %v", v)
	}
	if v := value(m.posts.WithLabelValues("anchored")); v != 2 {
		t.Errorf("anchored posts %v", v)
	}
	// A checkpoint not after the anchored one is never posted again.
	a.Offer(signed(t, sv, 50))
	time.Sleep(20 * time.Millisecond)
	if got := p.posted(); len(got) != 2 {
		t.Fatalf("posted %v after re-offering 50", got)
	}
}

// A failed post is retried with backoff until it is accepted; a refused one is not retried,
// and the next offer is posted.
func TestAnchorerRetriesAndRefusals(t *testing.T) {
	sv, pemText := testKey(t, "log")
	unavailable := errors.New("connection refused")
	p := &post{script: []error{unavailable, unavailable, unavailable, fmt.Errorf("%w: AnchorKeyChanged", ErrRefused)}}
	reg := prometheus.NewRegistry()
	m, _ := NewMetrics(reg)
	a, err := New(Options{Post: p.fn, PublicKeyPEM: pemText, MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Interval: -1, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	start(t, a)
	began := time.Now()
	a.Offer(signed(t, sv, 3))
	waitFor(t, "the refusal", func() bool { return len(p.posted()) == 4 })
	// Backoffs 5, 10, 20 ms between the four posts.
	if d := time.Since(began); d < 35*time.Millisecond {
		t.Errorf("four posts in %v: no backoff", d)
	}
	time.Sleep(30 * time.Millisecond)
	if got := p.posted(); len(got) != 4 || a.Anchored() != 0 {
		t.Fatalf("posted %v, anchored %d: a refused checkpoint was retried or counted", got, a.Anchored())
	}
	a.Offer(signed(t, sv, 3)) // the refused one again: dropped
	a.Offer(signed(t, sv, 4))
	waitFor(t, "anchored 4", func() bool { return a.Anchored() == 4 })
	if got := p.posted(); len(got) != 5 || got[4] != 4 {
		t.Fatalf("posted %v", got)
	}
	for result, want := range map[string]float64{"failed": 3, "refused": 1, "anchored": 1} {
		if v := value(m.posts.WithLabelValues(result)); v != want {
			t.Errorf("%s posts %v, want %v", result, v, want)
		}
	}
}

// Under a steady stream of checkpoints the posts start at least Interval apart, each the
// newest offered; a checkpoint after a quiet Interval goes at once, and after Flush nothing
// waits.
func TestAnchorerInterval(t *testing.T) {
	sv, pemText := testKey(t, "log")
	p := &post{}
	const interval = 300 * time.Millisecond
	a, err := New(Options{Post: p.fn, PublicKeyPEM: pemText, Interval: interval})
	if err != nil {
		t.Fatal(err)
	}
	start(t, a)
	began := time.Now()
	a.Offer(signed(t, sv, 1))
	waitFor(t, "anchored 1", func() bool { return a.Anchored() == 1 })
	if d := time.Since(began); d > interval/2 {
		t.Errorf("the first checkpoint waited %v", d)
	}
	// Offers every 10 ms for 2.5 intervals: 1 posted at once, then at most one per interval.
	for seq := uint64(2); time.Since(began) < 5*interval/2; seq++ {
		a.Offer(signed(t, sv, seq))
		time.Sleep(10 * time.Millisecond)
	}
	posted := p.posted()
	if len(posted) > 3 {
		t.Fatalf("posted %v in 2.5 intervals: more than one post per interval", posted)
	}
	if len(posted) < 2 {
		t.Fatalf("posted %v in 2.5 intervals: the wait held back more than one interval", posted)
	}
	for i := 1; i < len(posted); i++ {
		if posted[i] <= posted[i-1]+1 {
			t.Errorf("posted %v: each post should be the newest of many offers", posted)
		}
	}
	// Flush: the waiting newest goes without waiting out the interval.
	n := len(posted)
	last := uint64(1000)
	a.Offer(signed(t, sv, last))
	a.Flush()
	flushed := time.Now()
	waitFor(t, "anchored after Flush", func() bool { return a.Anchored() == last })
	if d := time.Since(flushed); d > interval/2 {
		t.Errorf("after Flush the last checkpoint waited %v", d)
	}
	if got := p.posted(); len(got) != n+1 {
		t.Errorf("posted %v after Flush, want one more than %d", got, n)
	}
	a.Offer(signed(t, sv, last+1))
	waitFor(t, "anchored after Flush, back to back", func() bool { return a.Anchored() == last+1 })
}

func TestNewRefuses(t *testing.T) {
	_, pemText := testKey(t, "log")
	noop := func(context.Context, string, v1alpha1.AnchoredCheckpoint) error { return nil }
	for name, o := range map[string]Options{
		"no post":    {PublicKeyPEM: pemText},
		"no key":     {Post: noop},
		"key no PEM": {Post: noop, PublicKeyPEM: "key"},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// anchorJSON is a ReceiptAnchor as kubectl prints it.
func anchorJSON(t testing.TB, pemText string, sc receipt.SignedCheckpoint, mod func(map[string]any)) []byte {
	t.Helper()
	cp := ToAPI(sc)
	ra := v1alpha1.ReceiptAnchor{
		TypeMeta:   metav1.TypeMeta{APIVersion: "actgate.io/v1alpha1", Kind: "ReceiptAnchor"},
		ObjectMeta: metav1.ObjectMeta{Name: "uid-1", Namespace: "billing"},
		Spec:       v1alpha1.ReceiptAnchorSpec{PodName: "agent-0", PodUID: "uid-1", PublicKey: pemText, KeyID: sc.KeyID},
		Status:     v1alpha1.ReceiptAnchorStatus{Checkpoint: &cp},
	}
	b, _ := json.Marshal(ra)
	if mod == nil {
		return b
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	mod(m)
	b, _ = json.Marshal(m)
	return b
}

func TestParseObject(t *testing.T) {
	sv, pemText := testKey(t, "log")
	_, otherPEM := testKey(t, "other")
	sc := signed(t, sv, 6)
	obj, err := ParseObject(anchorJSON(t, pemText, sc, nil))
	if err != nil {
		t.Fatal(err)
	}
	if obj.Checkpoint.Seq != 6 || obj.Checkpoint.Head != sc.Head || obj.Anchor.Spec.PodName != "agent-0" {
		t.Fatalf("parsed %+v", obj.Checkpoint)
	}
	status := func(m map[string]any) map[string]any {
		return m["status"].(map[string]any)["checkpoint"].(map[string]any)
	}
	for _, tc := range []struct {
		name string
		data []byte
		want error
	}{
		{"not JSON", []byte("apiVersion: actgate.io/v1alpha1"), ErrInvalid},
		{"two objects", append(anchorJSON(t, pemText, sc, nil), '{', '}'), ErrInvalid},
		{"a list", []byte(`{"apiVersion":"v1","kind":"List","items":[]}`), ErrInvalid},
		{"another kind", anchorJSON(t, pemText, sc, func(m map[string]any) { m["kind"] = "Act" }), ErrInvalid},
		{"another version", anchorJSON(t, pemText, sc, func(m map[string]any) { m["apiVersion"] = "actgate.io/v1" }), ErrInvalid},
		{"no key", anchorJSON(t, "", sc, nil), ErrInvalid},
		{"nothing anchored", anchorJSON(t, pemText, sc, func(m map[string]any) { delete(m, "status") }), ErrInvalid},
		{"key id not the spec's", anchorJSON(t, pemText, sc, func(m map[string]any) { m["spec"].(map[string]any)["keyID"] = "sha256:x" }), ErrInvalid},
		{"seq a string", anchorJSON(t, pemText, sc, func(m map[string]any) { status(m)["seq"] = "6" }), ErrInvalid},
		{"time not canonical", anchorJSON(t, pemText, sc, func(m map[string]any) { status(m)["time"] = "2026-12-01T13:00:00.000000006+00:00" }), ErrInvalid},
		{"seq altered", anchorJSON(t, pemText, sc, func(m map[string]any) { status(m)["seq"] = 9 }), receipt.ErrBadSignature},
		{"another key", anchorJSON(t, otherPEM, sc, nil), receipt.ErrBadSignature},
		{"too large", append(anchorJSON(t, pemText, sc, nil), bytes.Repeat([]byte(" "), MaxObjectBytes)...), ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj, err := ParseObject(tc.data)
			if obj != nil || !errors.Is(err, tc.want) {
				t.Fatalf("got %v, %v; want %v", obj, err, tc.want)
			}
			if strings.Contains(err.Error(), "BEGIN PUBLIC KEY") {
				t.Errorf("error quotes the key: %v", err)
			}
		})
	}
}

func FuzzParseObject(f *testing.F) {
	sv, pemText := testKey(f, "log")
	f.Add(anchorJSON(f, pemText, signed(f, sv, 6), nil))
	f.Add([]byte(`{"apiVersion":"actgate.io/v1alpha1","kind":"ReceiptAnchor","status":{"checkpoint":{"seq":1}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		obj, err := ParseObject(data)
		if err != nil {
			if obj != nil || !(errors.Is(err, ErrInvalid) || errors.Is(err, receipt.ErrBadSignature)) {
				t.Fatalf("error %v with %v", err, obj)
			}
			return
		}
		if err := receipt.VerifyCheckpoint(obj.Key.Verifier, obj.Checkpoint); err != nil {
			t.Fatalf("accepted an anchor that does not verify: %v", err)
		}
	})
}
