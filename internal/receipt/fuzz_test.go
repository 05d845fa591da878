package receipt

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
)

// maxOps bounds the operations mutate applies, so that one input costs microseconds.
const maxOps = 16

// mutate applies ops to log, three bytes per operation: what, and two operands that pick a
// byte offset or line indices.
func mutate(log, ops []byte) []byte {
	b := slices.Clone(log)
	ops = ops[:min(len(ops), 3*maxOps)]
	for i := 0; i+2 < len(ops); i += 3 {
		op, x, y := ops[i], int(ops[i+1]), int(ops[i+2])
		if len(b) == 0 {
			b = append(b, ops[i+1])
			continue
		}
		pos := (x<<8 | y) % len(b)
		ls := lines(b)
		n := len(ls)
		switch op % 8 {
		case 0: // flip bits of one byte
			b[pos] ^= byte(y) | 1
		case 1: // delete a byte
			b = slices.Delete(b, pos, pos+1)
		case 2: // insert a byte
			b = slices.Insert(b, pos, byte(x))
		case 3: // delete a line
			b = join(slices.Delete(ls, x%n, x%n+1))
		case 4: // swap two lines
			ls[x%n], ls[y%n] = ls[y%n], ls[x%n]
			b = join(ls)
		case 5: // repeat a line elsewhere
			b = join(slices.Insert(ls, y%(n+1), ls[x%n]))
		case 6: // truncate
			b = b[:pos]
		case 7: // overwrite a byte
			b[pos] = byte(x)
		}
	}
	return b
}

// FuzzVerify: Verify never panics on arbitrary bytes, and never vouches for a mutation of a
// valid log: when a mutated log verifies, everything up to its last checkpoint is byte for byte
// a prefix of the original, and whatever follows is reported as the unsigned tail and consists
// of original receipt lines (the documented limit: cutting lines off the end, or deleting the
// checkpoints after some point, leaves a shorter or unsigned log that verifies).
//
// Run it with a short minimization budget: every input re-verifies a log with three
// signatures, and minimizing a 2 KB input at the default 60 s budget leaves little time to
// fuzz:
//
//	go test -run '^$' -fuzz FuzzVerify -fuzzminimizetime 2s ./internal/receipt
func FuzzVerify(f *testing.F) {
	sv := testKey(f, "fuzz")
	_, valid := buildLog(f, f.TempDir(), "log", sv, 0, 3, 1, 3)
	ls := lines(valid)
	original := map[string]bool{}
	for _, l := range ls {
		original[string(l)] = true
	}
	f.Add(valid, []byte{})
	f.Add([]byte{}, []byte{0, 0, 10})
	f.Add([]byte("{}\n"), []byte{3, 2, 0})
	f.Add(join(ls[:4]), []byte{4, 1, 2})
	f.Add([]byte(`{"checkpoint":{}}`+"\n"), []byte{5, 0, 3, 1, 0, 200})
	f.Add(bytes.Repeat([]byte("\n"), 10), []byte{6, 7, 0})
	f.Add(valid[:len(valid)-1], []byte{7, '"', 99, 2, ' ', 40})
	f.Add([]byte("0\n"), []byte("C10C20")) // both trailing checkpoints deleted
	f.Fuzz(func(t *testing.T, data, ops []byte) {
		if rep, err := Verify(bytes.NewReader(data), sv); err == nil {
			if rep.UnsignedTail > rep.Receipts || uint64(rep.Receipts) < rep.SignedSeq {
				t.Fatalf("inconsistent report %+v", rep)
			}
		}
		m := mutate(valid, ops)
		s, err := verifyStream(bytes.NewReader(m), sv, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.problems) > 0 || bytes.Equal(m, valid) {
			return
		}
		if signed := m[:s.goodCpOffset]; !bytes.HasPrefix(valid, signed) {
			t.Fatalf("mutated log verifies with a signed part that is not the original's (%+v):\n%s", s.rep, m)
		}
		tail := lines(m[s.goodCpOffset:])
		if len(tail) != s.rep.UnsignedTail {
			t.Fatalf("%d lines after the last checkpoint, report says %d unsigned:\n%s", len(tail), s.rep.UnsignedTail, m)
		}
		for _, l := range tail {
			if !original[string(l)] {
				t.Fatalf("mutated log verifies with a new receipt in its unsigned tail:\n%s", m)
			}
		}
	})
}

// FuzzDecodeReceipt holds the hand-written receipt decoder to encoding/json (with unknown
// members refused) on every line Verify could accept: when either decodes a line whose
// canonical re-encoding is the line itself, the other decodes it too, to the same receipt.
func FuzzDecodeReceipt(f *testing.F) {
	sv := testKey(f, "fuzz")
	_, valid := buildLog(f, f.TempDir(), "log", sv, 0, 4)
	for _, l := range lines(valid)[:4] {
		f.Add(bytes.TrimSuffix(l, []byte("\n")))
	}
	for _, s := range []string{`{}`, `{"seq":1}`, `{"tool":"\u00e9\ud83d\ude00\ud800"}`, `{"tool":"a","tool":"b"}`, `{"Tool":"a"}`,
		`{"seq":1.0}`, `{"time":"2026-01-01T00:00:00+01:00"}`, " {\"act_id\" : \"x\" } ", `{"tool":"\/"}`, "{\"tool\":\"\xff\"}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		mine, errMine := decodeReceipt(line)
		var std Receipt
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		errStd := dec.Decode((*receiptWire)(&std))
		if errStd == nil && dec.InputOffset() != int64(len(bytes.TrimRight(line, " \t\r\n"))) {
			errStd = errSyntax // trailing data: not one JSON value
		}
		canonical := func(r *Receipt) bool {
			c, err := appendCanonical(nil, r, true)
			return err == nil && bytes.Equal(c, line)
		}
		if errMine == nil && canonical(&mine) || errStd == nil && canonical(&std) {
			if errMine != nil || errStd != nil {
				t.Fatalf("canonical line accepted by one decoder only: mine %v, encoding/json %v", errMine, errStd)
			}
			if !reflect.DeepEqual(mine, std) {
				t.Fatalf("decoders differ:\nmine %+v\nstd  %+v", mine, std)
			}
		}
	})
}
