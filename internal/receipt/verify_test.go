package receipt

import (
	"bytes"
	"encoding/base64"
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/sigstore/sigstore/pkg/signature"
)

// The tamper tests run on a log of three batches of four receipts:
//
//	line  0-3  receipts 1-4     line  4  checkpoint 4 (prev_seq 0)
//	line  5-8  receipts 5-8     line  9  checkpoint 8 (prev_seq 4)
//	line 10-13 receipts 9-12    line 14  checkpoint 12 (prev_seq 8)
const (
	lnR1, lnR5, lnR6, lnR7, lnR8, lnR12 = 0, 5, 6, 7, 8, 13
	lnCP4, lnCP8, lnCP12                = 4, 9, 14
)

// editReceipt rewrites the receipt on a line; rechain recomputes its digest afterwards (what
// someone who knows SHA-256 but not the key would do).
func editReceipt(t *testing.T, line []byte, mod func(*Receipt), rechain bool) []byte {
	t.Helper()
	r, err := decodeReceipt(bytes.TrimSuffix(line, []byte("\n")))
	if err != nil {
		t.Fatal(err)
	}
	mod(&r)
	if rechain {
		r.Digest, _, _ = digestOf(nil, &r)
	}
	c, err := r.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	return append(c, '\n')
}

// editCheckpoint rewrites the checkpoint on a line and signs it with sv, or keeps its
// signature when sv is nil; flip flips a bit of the signature.
func editCheckpoint(t *testing.T, line []byte, mod func(*Checkpoint), sv signature.Signer, flip bool) []byte {
	t.Helper()
	c, sig, err := decodeCheckpoint(bytes.TrimSuffix(line, []byte("\n")))
	if err != nil {
		t.Fatal(err)
	}
	if mod != nil {
		mod(&c)
	}
	body, err := c.appendCanonical(nil)
	if err != nil {
		t.Fatal(err)
	}
	if sv != nil {
		if sig, err = sv.SignMessage(bytes.NewReader(body)); err != nil {
			t.Fatal(err)
		}
	}
	if flip {
		sig = slices.Clone(sig)
		sig[len(sig)/2] ^= 0x10
	}
	return appendCheckpointLine(nil, body, sig)
}

func TestVerifyTamper(t *testing.T) {
	sv := testKey(t, "tamper")
	other := testKey(t, "someone else")
	dir := t.TempDir()
	_, good := buildLog(t, dir, "a", sv, 0, 4, 4, 4)
	_, foreign := buildLog(t, dir, "b", sv, 1000, 4, 4, 4) // same key, other receipts
	if rep, err := Verify(bytes.NewReader(good), sv); err != nil || rep.Receipts != 12 || rep.Checkpoints != 3 {
		t.Fatalf("the untampered log: %+v %v", rep, err)
	}
	if n := len(lines(good)); n != 15 {
		t.Fatalf("%d lines", n)
	}

	tests := []struct {
		name   string
		tamper func(ls [][]byte) [][]byte
		want   []Code
	}{
		{"alter the decision of one receipt", func(ls [][]byte) [][]byte {
			ls[lnR6] = editReceipt(t, ls[lnR6], func(r *Receipt) { r.Decision = DecisionAllow; r.Code = "" }, false)
			return ls
		}, []Code{CodeAltered}},
		{"alter the arguments digest of one receipt", func(ls [][]byte) [][]byte {
			ls[lnR6] = editReceipt(t, ls[lnR6], func(r *Receipt) { r.ArgumentsDigest = ZeroDigest }, false)
			return ls
		}, []Code{CodeAltered}},
		{"alter one receipt and recompute its digest", func(ls [][]byte) [][]byte {
			ls[lnR6] = editReceipt(t, ls[lnR6], func(r *Receipt) { r.Decision = DecisionAllow; r.Code = "" }, true)
			return ls
		}, []Code{CodeChainBroken}},
		{"alter the last receipt of a batch and recompute its digest", func(ls [][]byte) [][]byte {
			ls[lnR8] = editReceipt(t, ls[lnR8], func(r *Receipt) { r.Tool = "other" }, true)
			return ls
		}, []Code{CodeCheckpointMismatch, CodeChainBroken}},
		{"alter a receipt's seq", func(ls [][]byte) [][]byte {
			ls[lnR6] = editReceipt(t, ls[lnR6], func(r *Receipt) { r.Seq = 7 }, true)
			return ls
		}, []Code{CodeRemoved, CodeReordered, CodeChainBroken}},
		{"delete one receipt", func(ls [][]byte) [][]byte { return slices.Delete(ls, lnR6, lnR6+1) }, []Code{CodeRemoved}},
		{"delete the first receipt", func(ls [][]byte) [][]byte { return slices.Delete(ls, lnR1, lnR1+1) }, []Code{CodeRemoved}},
		{"delete the last receipt of a batch", func(ls [][]byte) [][]byte { return slices.Delete(ls, lnR8, lnR8+1) },
			[]Code{CodeCheckpointMismatch, CodeRemoved}},
		{"delete a whole batch", func(ls [][]byte) [][]byte { return slices.Delete(ls, lnR5, lnCP8+1) },
			[]Code{CodeRemoved, CodeCheckpointRemoved}},
		{"delete a checkpoint", func(ls [][]byte) [][]byte { return slices.Delete(ls, lnCP4, lnCP4+1) }, []Code{CodeCheckpointRemoved}},
		{"swap two receipts", func(ls [][]byte) [][]byte { ls[lnR5], ls[lnR6] = ls[lnR6], ls[lnR5]; return ls }, []Code{CodeReordered}},
		{"swap two receipts of different batches", func(ls [][]byte) [][]byte { ls[lnR1], ls[lnR5] = ls[lnR5], ls[lnR1]; return ls },
			// 5 first (2, 3, 4 then fill the gap it opened), checkpoint 4 after head 5, 1 late.
			[]Code{CodeReordered, CodeReordered, CodeReordered, CodeCheckpointMismatch, CodeReordered}},
		{"swap a receipt and its checkpoint", func(ls [][]byte) [][]byte { ls[lnR8], ls[lnCP8] = ls[lnCP8], ls[lnR8]; return ls },
			[]Code{CodeCheckpointMismatch}},
		{"repeat a receipt", func(ls [][]byte) [][]byte { return slices.Insert(ls, lnR7, ls[lnR6]) }, []Code{CodeReordered}},
		{"repeat a checkpoint", func(ls [][]byte) [][]byte { return slices.Insert(ls, lnCP8+1, ls[lnCP8]) }, []Code{CodeCheckpointReordered}},
		{"flip a bit of a checkpoint signature", func(ls [][]byte) [][]byte {
			ls[lnCP8] = editCheckpoint(t, ls[lnCP8], nil, nil, true)
			return ls
		}, []Code{CodeCheckpointBadSignature}},
		{"sign a checkpoint with another key", func(ls [][]byte) [][]byte {
			ls[lnCP8] = editCheckpoint(t, ls[lnCP8], nil, other, false)
			return ls
		}, []Code{CodeCheckpointBadSignature}},
		{"move a checkpoint's head to a rechained receipt", func(ls [][]byte) [][]byte {
			ls[lnR8] = editReceipt(t, ls[lnR8], func(r *Receipt) { r.Tool = "other" }, true)
			r, _ := decodeReceipt(bytes.TrimSuffix(ls[lnR8], []byte("\n")))
			ls[lnCP8] = editCheckpoint(t, ls[lnCP8], func(c *Checkpoint) { c.Head = r.Digest }, nil, false)
			return ls
		}, []Code{CodeCheckpointBadSignature, CodeChainBroken}},
		{"splice a receipt from another log", func(ls [][]byte) [][]byte {
			ls[lnR6] = lines(foreign)[lnR6]
			return ls
		}, []Code{CodeChainBroken, CodeChainBroken}},
		{"splice a whole batch from another log", func(ls [][]byte) [][]byte {
			f := lines(foreign)
			copy(ls[lnR5:lnCP8+1], f[lnR5:lnCP8+1])
			return ls
		}, []Code{CodeChainBroken, CodeChainBroken}},
		{"append another log's receipts", func(ls [][]byte) [][]byte {
			return append(ls, lines(foreign)[lnR1:lnCP4+1]...)
		}, []Code{CodeReordered, CodeReordered, CodeReordered, CodeReordered, CodeCheckpointMismatch, CodeCheckpointReordered}},
		{"torn last line", func(ls [][]byte) [][]byte {
			ls[lnCP12] = ls[lnCP12][:40]
			return ls
		}, []Code{CodeTornTail}},
		{"whitespace in a receipt", func(ls [][]byte) [][]byte {
			ls[lnR6] = bytes.Replace(ls[lnR6], []byte(`,"seq":`), []byte(`, "seq":`), 1)
			return ls
		}, []Code{CodeNotCanonical}},
		{"escaped character in a receipt", func(ls [][]byte) [][]byte {
			ls[lnR6] = bytes.Replace(ls[lnR6], []byte(`"tool":"p`), []byte(`"tool":"\u0070`), 1)
			return ls
		}, []Code{CodeNotCanonical}},
		{"upper-case member name", func(ls [][]byte) [][]byte {
			ls[lnR6] = bytes.Replace(ls[lnR6], []byte(`"tool":`), []byte(`"Tool":`), 1)
			return ls
		}, []Code{CodeSyntax}},
		{"duplicate member", func(ls [][]byte) [][]byte {
			ls[lnR6] = bytes.Replace(ls[lnR6], []byte(`"tool":`), []byte(`"tool":"x","tool":`), 1)
			return ls
		}, []Code{CodeSyntax}},
		{"unknown member", func(ls [][]byte) [][]byte {
			ls[lnR6] = bytes.Replace(ls[lnR6], []byte(`"tool":`), []byte(`"arguments":{"amount":1},"tool":`), 1)
			return ls
		}, []Code{CodeSyntax}},
		{"garbage line", func(ls [][]byte) [][]byte { return slices.Insert(ls, lnR6, []byte("not json\n")) }, []Code{CodeSyntax}},
		{"receipt replaced by garbage", func(ls [][]byte) [][]byte { ls[lnR6] = []byte("{}\n"); return ls }, []Code{CodeInvalid}},
		{"empty line", func(ls [][]byte) [][]byte { return slices.Insert(ls, lnR6, []byte("\n")) }, []Code{CodeSyntax}},
		{"CRLF line end", func(ls [][]byte) [][]byte {
			ls[lnR6] = append(bytes.TrimSuffix(ls[lnR6], []byte("\n")), '\r', '\n')
			return ls
		}, []Code{CodeNotCanonical}},
		{"non-canonical base64 in a signature", func(ls [][]byte) [][]byte {
			c, sig, _ := decodeCheckpoint(bytes.TrimSuffix(ls[lnCP8], []byte("\n")))
			body, _ := c.appendCanonical(nil)
			enc := base64.StdEncoding.EncodeToString(sig)
			line := appendCheckpointLine(nil, body, sig)
			ls[lnCP8] = bytes.Replace(line, []byte(enc), []byte(enc[:10]+`\n`+enc[10:]), 1)
			return ls
		}, []Code{CodeNotCanonical}},
		{"checkpoint of the wrong type", func(ls [][]byte) [][]byte {
			ls[lnCP8] = editCheckpoint(t, ls[lnCP8], func(c *Checkpoint) { c.Type = "authority" }, sv, false)
			return ls
		}, []Code{CodeCheckpointInvalid}},
		{"truncated at a line boundary (undetectable: reported as unsigned tail)", func(ls [][]byte) [][]byte {
			return ls[:lnCP12]
		}, nil},
		{"truncated after a checkpoint (undetectable without an anchor)", func(ls [][]byte) [][]byte {
			return ls[:lnCP8+1]
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ls := tt.tamper(slices.Clone(lines(good)))
			b := join(ls)
			if bytes.Equal(b, good) {
				t.Fatal("the tamper changed nothing")
			}
			_, err := Verify(bytes.NewReader(b), sv)
			if got := codesOf(err); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("codes %v, want %v\nerror: %v\nproblems: %v", got, tt.want, err, ProblemsOf(err))
			}
			if tt.want == nil && err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			for _, p := range ProblemsOf(err) {
				if p.Line == 0 || strings.Contains(p.Detail, "payment") || strings.Contains(p.Detail, "act-") {
					t.Errorf("problem %v: no line, or quotes the log", p)
				}
			}
		})
	}
}

func TestVerifyUnsignedTail(t *testing.T) {
	sv := testKey(t, "tail")
	_, good := buildLog(t, t.TempDir(), "a", sv, 0, 4, 4)
	ls := lines(good)
	rep, err := Verify(bytes.NewReader(join(ls[:len(ls)-1])), sv)
	if err != nil || rep.Receipts != 8 || rep.UnsignedTail != 4 || rep.SignedSeq != 4 || rep.Head == rep.SignedHead {
		t.Fatalf("%+v %v", rep, err)
	}
}

// TestVerifyAnchored: an anchor taken from an earlier report detects truncation and rewriting
// that the log alone cannot.
func TestVerifyAnchored(t *testing.T) {
	sv := testKey(t, "anchor")
	dir := t.TempDir()
	_, good := buildLog(t, dir, "a", sv, 0, 4, 4, 4)
	_, foreign := buildLog(t, dir, "b", sv, 1000, 4, 4, 4)
	rep, err := Verify(bytes.NewReader(good), sv)
	if err != nil {
		t.Fatal(err)
	}
	final := Anchor{Seq: rep.SignedSeq, Digest: rep.SignedHead}
	ls := lines(good)
	mid, _ := Verify(bytes.NewReader(join(ls[:lnCP8+1])), sv)
	middle := Anchor{Seq: mid.SignedSeq, Digest: mid.SignedHead}

	for _, tt := range []struct {
		name    string
		log     []byte
		anchors []Anchor
		want    []Code
	}{
		{"intact, final anchor", good, []Anchor{final}, nil},
		{"intact, both anchors", good, []Anchor{final, middle}, nil},
		{"truncated after a checkpoint", join(ls[:lnCP8+1]), []Anchor{final}, []Code{CodeAnchorMissing}},
		{"truncated, earlier anchor still holds", join(ls[:lnCP8+1]), []Anchor{middle}, nil},
		{"replaced by another valid log with the same key", foreign, []Anchor{middle}, []Code{CodeAnchorMismatch}},
		{"wrong digest", good, []Anchor{{Seq: 8, Digest: ZeroDigest}}, []Code{CodeAnchorMismatch}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := VerifyAnchored(bytes.NewReader(tt.log), sv, tt.anchors...)
			if got := codesOf(err); !reflect.DeepEqual(got, tt.want) || (tt.want == nil && err != nil) {
				t.Fatalf("codes %v, want %v (%v)", got, tt.want, err)
			}
		})
	}
}

// TestVerifyBadInput: inputs that are not logs at all.
func TestVerifyBadInput(t *testing.T) {
	sv := testKey(t, "bad")
	for _, tt := range []struct {
		name string
		in   string
		want []Code
	}{
		{"empty", "", nil},
		{"no newline", "{}", []Code{CodeTornTail}},
		{"array", "[]\n", []Code{CodeSyntax}},
		{"number", "1\n", []Code{CodeSyntax}},
		{"null", "null\n", []Code{CodeSyntax}},
		{"empty object", "{}\n", []Code{CodeInvalid}},
		{"null member", `{"act_id":null}` + "\n", []Code{CodeSyntax}},
		{"number as string member", `{"act_id":1}` + "\n", []Code{CodeSyntax}},
		{"string seq", `{"seq":"1"}` + "\n", []Code{CodeSyntax}},
		{"negative seq", `{"seq":-1}` + "\n", []Code{CodeSyntax}},
		{"seq with leading zero", `{"seq":01}` + "\n", []Code{CodeSyntax}},
		{"seq overflow", `{"seq":18446744073709551616}` + "\n", []Code{CodeSyntax}},
		{"bad time", `{"time":"yesterday"}` + "\n", []Code{CodeSyntax}},
		{"control character in string", "{\"tool\":\"a\x01\"}\n", []Code{CodeSyntax}},
		{"bad escape", `{"tool":"\x"}` + "\n", []Code{CodeSyntax}},
		{"unterminated string", `{"tool":"abc}` + "\n", []Code{CodeSyntax}},
		{"trailing comma", `{"tool":"a",}` + "\n", []Code{CodeSyntax}},
		{"trailing data", `{"tool":"a"} x` + "\n", []Code{CodeSyntax}},
		{"checkpoint prefix, garbage", `{"checkpoint":1}` + "\n", []Code{CodeSyntax}},
		{"checkpoint without signature", `{"checkpoint":{"head":"x"}}` + "\n", []Code{CodeSyntax}},
		{"long line", strings.Repeat("a", MaxLineBytes+1) + "\n", []Code{CodeSyntax}},
		{"very long line", strings.Repeat("a", 200<<10) + "\n", []Code{CodeSyntax}},
		{"very long torn line", strings.Repeat("a", 200<<10), []Code{CodeTornTail}},
		{"many bad lines", strings.Repeat("x\n", MaxProblems+5), append(slices.Repeat([]Code{CodeSyntax}, MaxProblems), CodeTooManyProblems)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Verify(strings.NewReader(tt.in), sv)
			if got := codesOf(err); !reflect.DeepEqual(got, tt.want) || (tt.want == nil && err != nil) {
				t.Fatalf("codes %v, want %v (%v)", got, tt.want, err)
			}
		})
	}
	if _, err := Verify(strings.NewReader(""), nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("nil verifier: %v", err)
	}
	if _, err := Verify(iotest.ErrReader(errors.New("disk")), sv); err == nil || ProblemsOf(err) != nil {
		t.Fatalf("read error: %v", err)
	}
}

// TestNewVerifierPEM: the public key a log's owner writes beside it loads; anything else is
// ErrInvalid.
func TestNewVerifierPEM(t *testing.T) {
	dir := t.TempDir()
	sv, err := LoadOrCreateSigner(dir+"/receipts.key", dir+"/receipts.pub.pem")
	if err != nil {
		t.Fatal(err)
	}
	pemBytes, err := os.ReadFile(dir + "/receipts.pub.pem")
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewVerifierPEM(pemBytes)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := sv.SignMessage(strings.NewReader("checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	if err := v.VerifySignature(bytes.NewReader(sig), strings.NewReader("checkpoint")); err != nil {
		t.Fatalf("the loaded key does not verify its signer's signature: %v", err)
	}
	for _, bad := range []string{"", "not pem", "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"} {
		if _, err := NewVerifierPEM([]byte(bad)); !errors.Is(err, ErrInvalid) {
			t.Errorf("NewVerifierPEM(%q): %v, want ErrInvalid", bad, err)
		}
	}
}
