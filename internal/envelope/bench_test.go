package envelope

import (
	"encoding/json"
	"testing"
)

func BenchmarkParse(b *testing.B) {
	raw := exampleRaw(b)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(raw); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBuild(b *testing.B) {
	d := paymentDraft()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Build(d); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAuthorize(b *testing.B) {
	env, err := Build(paymentDraft())
	if err != nil {
		b.Fatal(err)
	}
	res := &Resolution{EnvelopeDigest: env.Digest(), Kind: KindOption}
	args := json.RawMessage(`{"amount_usd":4000,"beneficiary":"vendor@example.com","memo":"invoice 7781"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := AuthorizeCall(env, res, "payment.release", args); err != nil {
			b.Fatal(err)
		}
	}
}
