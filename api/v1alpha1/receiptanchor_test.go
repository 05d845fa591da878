package v1alpha1_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/actgate/actgate/api/v1alpha1"
)

// The API server itself keeps a ReceiptAnchor's key fixed and its checkpoint from moving back,
// whoever writes it.
func TestReceiptAnchorRules(t *testing.T) {
	e := apiServer(t)
	ctx := ctxFor(t)
	head := func(s string) string { return string(digest([]byte(s))) }
	ra := &v1alpha1.ReceiptAnchor{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace(t), Name: "5f0c6a62-9a3e-4a43-9b3e-0d6f3c2b1a00"},
		Spec: v1alpha1.ReceiptAnchorSpec{PodName: "agent-0", PodUID: "5f0c6a62-9a3e-4a43-9b3e-0d6f3c2b1a00",
			PublicKey: "-----BEGIN PUBLIC KEY-----\nx\n-----END PUBLIC KEY-----\n", KeyID: head("key")},
	}
	if err := e.Client.Create(ctx, ra); err != nil {
		t.Fatal(err)
	}
	cp := func(seq int64, h string) *v1alpha1.AnchoredCheckpoint {
		return &v1alpha1.AnchoredCheckpoint{Seq: seq, PrevSeq: 0, Head: head(h), Time: "2026-12-01T13:00:00Z", KeyID: head("key"), Signature: "c2ln"}
	}
	setStatus := func(c *v1alpha1.AnchoredCheckpoint) error {
		cur := &v1alpha1.ReceiptAnchor{}
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(ra), cur); err != nil {
			t.Fatal(err)
		}
		cur.Status.Checkpoint = c
		return e.Client.Status().Update(ctx, cur)
	}
	wantInvalid(t, setStatus(cp(5, "a")), "")
	wantInvalid(t, setStatus(cp(9, "b")), "")
	wantInvalid(t, setStatus(cp(9, "b")), "")
	wantInvalid(t, setStatus(cp(8, "c")), "the anchored checkpoint's seq never decreases")
	wantInvalid(t, setStatus(nil), "the anchored checkpoint's seq never decreases")
	bad := cp(10, "d")
	bad.Head = "sha256:00"
	wantInvalid(t, setStatus(bad), "status.checkpoint.head")

	cur := &v1alpha1.ReceiptAnchor{}
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(ra), cur); err != nil {
		t.Fatal(err)
	}
	if cur.Status.Checkpoint == nil || cur.Status.Checkpoint.Seq != 9 {
		t.Fatalf("anchored %+v, want seq 9", cur.Status.Checkpoint)
	}
	cur.Spec.PublicKey = "-----BEGIN PUBLIC KEY-----\ny\n-----END PUBLIC KEY-----\n"
	wantInvalid(t, e.Client.Update(ctx, cur), "spec is immutable")
}
