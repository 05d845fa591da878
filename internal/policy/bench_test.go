package policy

import (
	"context"
	"sort"
	"testing"
	"time"
)

func benchRequests() []struct {
	name string
	r    Request
	want Outcome
} {
	return []struct {
		name string
		r    Request
		want Outcome
	}{
		// The hot path: INFORMATIONAL, role None (tool-use-binding §22 T-F "hot search").
		{"hot-informational", req("search_invoices", `{"q":"overdue","limit":20}`), OutcomeAllow},
		// A rule with two CEL constraints, ending in an escalation.
		{"cel-escalate", req("send_payment", `{"amount":500,"currency":"EUR","to":"acct-1"}`), OutcomeEscalate},
		{"cel-deny", req("send_payment", `{"amount":50000,"currency":"EUR","to":"acct-1"}`), OutcomeDeny},
		{"permit", req("refund", `{"charge":"ch_1"}`), OutcomePermit},
		{"deny-unknown-tool", req("delete_account", `{}`), OutcomeDeny},
		{"deny-provenance", req("email_send", `{"to":"x@example.com"}`, on("mail", mailURL), prov("retrieval")), OutcomeDeny},
	}
}

// BenchmarkEvaluate measures one Evaluate per operation on the sample policy.
func BenchmarkEvaluate(b *testing.B) {
	c := compileSample(b, nil)
	ctx := context.Background()
	for _, bc := range benchRequests() {
		b.Run(bc.name, func(b *testing.B) {
			if d := c.Evaluate(ctx, bc.r); d.Outcome != bc.want {
				b.Fatalf("outcome %s %s, want %s", d.Outcome, d.Code, bc.want)
			}
			b.ReportAllocs()
			for b.Loop() {
				c.Evaluate(ctx, bc.r)
			}
		})
	}
}

// BenchmarkEvaluateLatency reports the p50/p95/p99 latency of single evaluations (T-F asks for
// enforce() p99; policy evaluation is one part of it).
func BenchmarkEvaluateLatency(b *testing.B) {
	c := compileSample(b, nil)
	ctx := context.Background()
	for _, bc := range benchRequests()[:2] {
		b.Run(bc.name, func(b *testing.B) {
			samples := make([]time.Duration, 0, 1<<16)
			for b.Loop() {
				start := time.Now()
				c.Evaluate(ctx, bc.r)
				if len(samples) < cap(samples) {
					samples = append(samples, time.Since(start))
				}
			}
			sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
			q := func(p float64) float64 { return float64(samples[int(p*float64(len(samples)-1))].Nanoseconds()) }
			b.ReportMetric(q(0.50), "p50-ns")
			b.ReportMetric(q(0.95), "p95-ns")
			b.ReportMetric(q(0.99), "p99-ns")
		})
	}
}

func BenchmarkEvaluateParallel(b *testing.B) {
	c := compileSample(b, nil)
	r := benchRequests()[0].r
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			c.Evaluate(ctx, r)
		}
	})
}

// BenchmarkCompile is the cost of accepting a policy change (the CEL environment and programs).
func BenchmarkCompile(b *testing.B) {
	spec := sampleSpec(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile("shop/payments", spec, 1); err != nil {
			b.Fatal(err)
		}
	}
}
