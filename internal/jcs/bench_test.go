package jcs

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	gowebpki "github.com/gowebpki/jcs"
)

// benchInputs returns the §6.4 envelope pretty-printed (as an agent would
// send it) and a deterministic ~10 KiB tool-argument object in the strict
// profile: integers, strings with some escapes and non-ASCII, nesting, and
// member names in non-canonical order.
func benchInputs(b *testing.B) []struct {
	name string
	in   []byte
} {
	b.Helper()
	var envelope bytes.Buffer
	if err := json.Indent(&envelope, readFile(b, filepath.Join(conformanceDir, "envelope.canonical.json")), "", "  "); err != nil {
		b.Fatal(err)
	}
	return []struct {
		name string
		in   []byte
	}{
		{"envelope", envelope.Bytes()},
		{"args10k", toolArgs(10 << 10)},
	}
}

// toolArgs generates a JSON object of at least size bytes from a fixed
// linear congruential sequence, so every run benchmarks the same bytes.
func toolArgs(size int) []byte {
	state := uint64(0x9E3779B97F4A7C15)
	next := func() uint64 {
		state = state*6364136223846793005 + 1442695040888963407
		return state >> 33
	}
	words := []string{"invoice", "beneficiary", "amount", "memo", "ledger", "région", "line\nbreak", "quote\"d", "zeta", "alpha"}
	b := []byte(`{"records":[`)
	for i := 0; len(b) < size-200; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		// Members deliberately out of order.
		b = append(b, `{"zone":`...)
		b = strconv.AppendQuote(b, words[next()%uint64(len(words))])
		b = append(b, `,"id":`...)
		b = strconv.AppendUint(b, next()%1_000_000_007, 10)
		b = append(b, `,"meta":{"tags":[`...)
		for j := uint64(0); j < next()%4; j++ {
			if j > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendQuote(b, words[next()%uint64(len(words))])
		}
		b = append(b, `],"weight":`...)
		b = strconv.AppendInt(b, int64(next()%20000)-10000, 10)
		b = append(b, `,"active":`...)
		b = strconv.AppendBool(b, next()%2 == 0)
		b = append(b, `},"amount_minor":`...)
		b = strconv.AppendUint(b, next()%100_000_000, 10)
		b = append(b, `,"beneficiary":`...)
		b = strconv.AppendQuote(b, "acct-"+strconv.FormatUint(next(), 36)+"@example.com")
		b = append(b, '}')
	}
	b = append(b, `],"tool":"ledger.batch_post","dry_run":false,"count":`...)
	b = strconv.AppendInt(b, int64(len(b)), 10)
	return append(b, '}')
}

// BenchmarkCanonical measures canonicalize+digest, Strict and Full, beside
// github.com/gowebpki/jcs Transform (+ the same digest) on the same input.
// cpu-ns/op is process CPU time per op (GC included), steadier than ns/op
// when other work shares the machine.
func BenchmarkCanonical(b *testing.B) {
	for _, input := range benchInputs(b) {
		// All three must agree before their speed means anything.
		want, err := Canonicalize(input.in, Strict)
		if err != nil {
			b.Fatalf("%s: %v", input.name, err)
		}
		if ref, err := gowebpki.Transform(input.in); err != nil || !bytes.Equal(ref, want) {
			b.Fatalf("%s: gowebpki disagrees: %v", input.name, err)
		}
		impls := []struct {
			name string
			fn   func([]byte) ([]byte, error)
		}{
			{"strict", func(in []byte) ([]byte, error) { return Canonicalize(in, Strict) }},
			{"full", func(in []byte) ([]byte, error) { return Canonicalize(in, Full) }},
			{"gowebpki", gowebpki.Transform},
		}
		for _, impl := range impls {
			b.Run(input.name+"/"+impl.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(input.in)))
				cpu0, n := processCPU(), 0
				for b.Loop() {
					out, err := impl.fn(input.in)
					if err != nil {
						b.Fatal(err)
					}
					if d := Digest(out); len(d) != 71 {
						b.Fatal(d)
					}
					n++
				}
				if cpu := processCPU() - cpu0; cpu > 0 {
					b.ReportMetric(float64(cpu.Nanoseconds())/float64(n), "cpu-ns/op")
				}
			})
		}
	}
}

// BenchmarkHostileNesting: a 1 MiB string under objects nested to the mode's
// bound, every one of which must be reordered. Work must stay linear in
// the input, not grow with input size times depth.
func BenchmarkHostileNesting(b *testing.B) {
	for _, tc := range []struct {
		name  string
		mode  Mode
		depth int
	}{{"strict", Strict, MaxDepth}, {"full", Full, MaxDepthFull}} {
		in := []byte(strings.Repeat(`{"b":0,"a":`, tc.depth) + `"` + strings.Repeat("x", 1<<20) + `"` + strings.Repeat("}", tc.depth))
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				if _, err := Canonicalize(in, tc.mode); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
