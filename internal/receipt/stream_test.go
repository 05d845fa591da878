package receipt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sigstore/sigstore/pkg/signature"
)

// podOutput is a container's stdout as `kubectl logs --timestamps` shows it: the log's mirror
// writes records, the process writes other lines between them.
type podOutput struct {
	mu sync.Mutex
	b  bytes.Buffer
	n  int
}

func (p *podOutput) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range lines(b) {
		p.n++
		fmt.Fprintf(&p.b, "2026-12-01T10:00:%02d.%06dZ %s", p.n%60, p.n, l)
	}
	return len(b), nil
}

func (p *podOutput) say(s string) { _, _ = p.Write([]byte(s + "\n")) }

func (p *podOutput) bytes() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return bytes.Clone(p.b.Bytes())
}

// streamOfRestarts writes a log mirrored to out across a restart of its process (the file
// kept, as an emptyDir survives a container restart): two commits, a reopen (which re-emits the
// last signed segment), two more commits. It returns the log's path.
func streamOfRestarts(t *testing.T, out *podOutput) string {
	t.Helper()
	sv := testKey(t, "stream")
	path := filepath.Join(t.TempDir(), "receipts.jsonl")
	i := 0
	for run := range 2 {
		out.say(fmt.Sprintf("actgate sidecar serving on http://127.0.0.1:15080 (run %d)", run))
		l := openTest(t, path, sv, func(o *Options) { o.MaxDelay = time.Hour; o.MaxBatch = 1 << 20; o.Mirror = out })
		for range 2 {
			for range 3 {
				i++
				if _, err := l.Append(sample(i)); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
			out.say(`{"level":"info","msg":"a log line in JSON","act_id":"act-0001"}`)
		}
		if err := l.Close(); err != nil || l.MirrorErr() != nil {
			t.Fatal(err, l.MirrorErr())
		}
	}
	return path
}

// TestStreamMirrorsLog: a log with a Mirror writes every committed receipt and checkpoint as a
// stream record; the stream, with the process's other lines and kubectl's timestamps around
// the records, verifies as the file does, the last signed segment re-emitted at the restart
// counted as repeated. A log pipeline that re-serializes each record (members reordered,
// spaces) keeps it verifiable.
func TestStreamMirrorsLog(t *testing.T) {
	out := &podOutput{}
	path := streamOfRestarts(t, out)
	sv := testKey(t, "stream")
	fileRep, err := verifyFile(t, path, sv)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := VerifyStream(bytes.NewReader(out.bytes()), sv, StreamOptions{})
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	if rep.Report != fileRep || rep.Receipts != 12 || rep.Checkpoints != 4 || rep.Ignored != 6 || rep.Repeated != 4 || rep.OtherLogs != 0 {
		t.Fatalf("stream report %+v, file %+v", rep, fileRep)
	}
	if keyID := keyIDOf(t, sv); rep.LogID != keyID {
		t.Errorf("log id %q, want %q", rep.LogID, keyID)
	}

	// Re-serialized by a pipeline: each record decoded and encoded again by encoding/json
	// (members sorted differently, HTML escapes), indented onto one line with spaces.
	var re bytes.Buffer
	for _, l := range lines(out.bytes()) {
		i := bytes.IndexByte(l, '{')
		var v map[string]any
		if i < 0 || !bytes.Contains(l, marker) || json.Unmarshal(l[i:], &v) != nil {
			re.Write(l)
			continue
		}
		b, _ := json.Marshal(map[string]any{"line": v["line"], StreamKey: v[StreamKey]})
		re.Write(bytes.ReplaceAll(b, []byte(`":`), []byte(`" : `)))
		re.WriteByte('\n')
	}
	if rep2, err := VerifyStream(&re, sv, StreamOptions{}); err != nil || rep2.Report != fileRep {
		t.Fatalf("re-serialized stream: %v %+v", err, rep2)
	}
}

func verifyFile(t *testing.T, path string, v signature.Verifier) (Report, error) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return Verify(bytes.NewReader(b), v)
}

func keyIDOf(t testing.TB, v signature.Verifier) string {
	t.Helper()
	pub, err := v.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	id, err := KeyID(pub)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestStreamDetectsTampering: each way a stream can lose or change evidence is reported with
// its code.
func TestStreamDetectsTampering(t *testing.T) {
	out := &podOutput{}
	streamOfRestarts(t, out)
	sv := testKey(t, "stream")
	all := lines(out.bytes())
	var recs, cps []int // indexes of receipt and checkpoint records in all
	for i, l := range all {
		switch {
		case bytes.Contains(l, []byte(`"line":{"checkpoint"`)):
			cps = append(cps, i)
		case bytes.Contains(l, marker):
			recs = append(recs, i)
		}
	}
	without := func(drop ...int) []byte {
		var b []byte
		for i, l := range all {
			if !slices.Contains(drop, i) {
				b = append(b, l...)
			}
		}
		return b
	}
	edit := func(i int, old, new string) []byte {
		c := slices.Clone(all)
		if !bytes.Contains(c[i], []byte(old)) {
			t.Fatalf("line %d has no %q: %s", i, old, c[i])
		}
		c[i] = bytes.Replace(c[i], []byte(old), []byte(new), 1)
		return join(c)
	}
	otherKey, keyID := keyIDOf(t, testKey(t, "other")), keyIDOf(t, sv)
	for _, tc := range []struct {
		name   string
		stream []byte
		want   []Code
	}{
		{"a receipt removed", without(recs[1]), []Code{CodeRemoved}},
		{"the first receipts lost", without(recs[0], recs[1]), []Code{CodeRemoved}},
		{"a receipt altered", edit(recs[2], `"tool":"payment.release"`, `"tool":"payment.refund"`), []Code{CodeAltered}},
		{"a receipt re-chained", edit(recs[4], `"prev":"sha256:`, `"prev":"sha256:0`), []Code{CodeNotCanonical, CodeAltered, CodeInvalid}},
		{"the last checkpoint removed", without(cps[len(cps)-1]), []Code{CodeUnsignedTail}},
		// cps[1] and cps[2] are one checkpoint, re-emitted at the restart: removing one copy
		// loses nothing. cps[0] is the first commit's.
		{"a middle checkpoint removed", without(cps[0]), []Code{CodeCheckpointRemoved}},
		{"a re-emitted checkpoint removed", without(cps[1]), nil},
		{"a checkpoint forged", edit(cps[0], `"signature":"`, `"signature":"AAAA`), []Code{CodeCheckpointBadSignature}},
		{"a record moved to another log", edit(recs[2], keyID, otherKey), []Code{CodeRemoved}},
		{"a broken record", edit(recs[5], `"line":{`, `"line":{{`), []Code{CodeSyntax, CodeRemoved}},
		{"a repeat with other content", append(slices.Clone(out.bytes()), bytes.Replace(all[recs[0]], []byte("act-0001"), []byte("act-9999"), 1)...),
			[]Code{CodeReordered}},
		{"nothing of the log", []byte("just\nlog lines\n"), []Code{CodeStreamEmpty}},
		{"only other logs", edit(recs[0], keyID, otherKey)[:len(all[recs[0]])], []Code{CodeStreamEmpty}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := VerifyStream(bytes.NewReader(tc.stream), sv, StreamOptions{})
			got := codesOf(err)
			if tc.want == nil {
				if err != nil {
					t.Errorf("want no problem: %v", err)
				}
				return
			}
			for _, w := range tc.want {
				if slices.Contains(got, w) {
					return
				}
			}
			t.Errorf("codes %v, want one of %v (%v)", got, tc.want, err)
		})
	}

	// An anchor pins the stream as it pins a file.
	rep, err := VerifyStream(bytes.NewReader(out.bytes()), sv, StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyStream(bytes.NewReader(without(cps[len(cps)-1], recs[len(recs)-1], recs[len(recs)-2], recs[len(recs)-3])), sv,
		StreamOptions{Anchors: []Anchor{{Seq: rep.SignedSeq, Digest: rep.SignedHead}}}); !slices.Contains(codesOf(err), CodeAnchorMissing) {
		t.Errorf("a stream cut at a commit boundary passed its anchor: %v", err)
	}
}

type failingWriter struct{ n int }

func (f *failingWriter) Write(b []byte) (int, error) {
	f.n++
	return 0, errors.New("stdout closed")
}

// TestMirrorFailureKeepsTheLog: a mirror whose Write fails does not fail the log: appends and
// commits go on, the file verifies, and MirrorErr says what happened.
func TestMirrorFailureKeepsTheLog(t *testing.T) {
	sv := testKey(t, "stream")
	path := filepath.Join(t.TempDir(), "receipts.jsonl")
	w := &failingWriter{}
	l := openTest(t, path, sv, func(o *Options) { o.Mirror = w })
	for i := range 3 {
		if _, err := l.AppendDurable(t.Context(), sample(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if l.MirrorErr() == nil || !strings.Contains(l.MirrorErr().Error(), "stdout closed") || w.n == 0 {
		t.Errorf("MirrorErr %v after %d writes", l.MirrorErr(), w.n)
	}
	if rep, err := verifyFile(t, path, sv); err != nil || rep.Receipts != 3 {
		t.Errorf("file: %+v %v", rep, err)
	}
}

func FuzzVerifyStream(f *testing.F) {
	out := &podOutput{}
	sv := testKey(f, "stream")
	path := filepath.Join(f.TempDir(), "receipts.jsonl")
	l := openTest(f, path, sv, func(o *Options) { o.MaxDelay = time.Hour; o.MaxBatch = 1 << 20; o.Mirror = out })
	for i := range 4 {
		if _, err := l.Append(sample(i + 1)); err != nil {
			f.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		f.Fatal(err)
	}
	valid := out.bytes()
	f.Add(valid)
	f.Add([]byte{})
	f.Add([]byte(`{"` + StreamKey + `":"x","line":{}}` + "\n"))
	f.Add([]byte(`{"` + StreamKey + `":null,"line":[]}` + "\n"))
	f.Add([]byte(`x {"` + StreamKey + `":"a","line":{"checkpoint":{}},"z":1}` + "\n"))
	f.Add(append(bytes.Repeat([]byte(`{"`+StreamKey+`":`), 3000), '\n'))
	f.Fuzz(func(t *testing.T, in []byte) {
		rep, err := VerifyStream(bytes.NewReader(in), sv, StreamOptions{})
		var ve *VerifyError
		if err != nil && !errors.As(err, &ve) {
			t.Fatalf("not a VerifyError: %v", err)
		}
		if err == nil && (rep.Receipts == 0 || rep.UnsignedTail != 0 || rep.Checkpoints == 0) {
			t.Fatalf("verified without a signed receipt: %+v", rep)
		}
		if err == nil && !bytes.Equal(in, valid) && rep.SignedSeq > 4 {
			t.Fatalf("verified receipts the log never signed: %+v", rep)
		}
	})
}
