package envelope_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/actgate/actgate/internal/envelope"
)

// A gate builds an envelope whose options are concrete tool calls, routes it to a
// principal, records the principal's resolution once, and grants authority only for the
// action whose digest the selected option carries.
func Example() {
	env, err := envelope.Build(envelope.Draft{
		Synopsis:        "Pay invoice 7781 in full today; the bank details match the contract.",
		Findings:        []string{"Invoice 7781 is for USD 4,000 and falls due tomorrow."},
		Recommendations: []string{"Release USD 4,000 to vendor@example.com now."},
		Offer:           "Ask for detail on any item.",
		Stem:            "How should invoice 7781 be paid?",
		Options: []envelope.DraftOption{
			{Label: "Pay in full now", Reasoning: "Avoids the late fee.", Tool: "payment.release",
				Args: json.RawMessage(`{"amount_usd":4000,"beneficiary":"vendor@example.com","memo":"invoice 7781"}`)},
			{Label: "Pay half now", Reasoning: "Keeps leverage until delivery.", Tool: "payment.release",
				Args: json.RawMessage(`{"amount_usd":2000,"beneficiary":"vendor@example.com","memo":"invoice 7781"}`)},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	reg := envelope.NewMemoryRegistry(time.Now)
	if _, err := reg.Emit(ctx, env, envelope.EmitOptions{Principal: "alice", TTL: time.Hour}); err != nil {
		fmt.Println(err)
		return
	}

	// alice selects the smaller payment.
	res, _ := envelope.ParseResolution([]byte(`{"binding_moment_resolution":{"envelope_digest":"` +
		env.Digest() + `","resolution":"option","option_idx":1}}`))
	if _, err := reg.Resolve(ctx, res, "alice"); err != nil {
		fmt.Println(err)
		return
	}
	_, err = reg.Resolve(ctx, res, "alice")
	fmt.Println("replay refused:", envelope.HasCode(err, envelope.CodeResAlreadyResolved))

	// The agent then calls the tool with the larger amount: not authorised (§12.6).
	_, err = envelope.AuthorizeCall(env, res, "payment.release",
		json.RawMessage(`{"amount_usd":4000,"beneficiary":"vendor@example.com","memo":"invoice 7781"}`))
	fmt.Println("larger payment refused:", envelope.HasCode(err, envelope.CodeResActionMismatch))

	g, err := envelope.AuthorizeCall(env, res, "payment.release",
		json.RawMessage(`{"memo":"invoice 7781","beneficiary":"vendor@example.com","amount_usd":2000}`))
	fmt.Println("chosen payment authorised:", err == nil, "option", g.OptionIdx)
	// Output:
	// replay refused: true
	// larger payment refused: true
	// chosen payment authorised: true option 1
}

// Parse checks a received envelope and names it by its digest (envelope-04 §6.4).
func ExampleParse() {
	raw, _ := os.ReadFile("testdata/conformance/envelope.canonical.json")
	env, err := envelope.Parse(raw)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(env.Canonical()), env.Digest())

	_, err = envelope.Parse([]byte(`{"synopsis":"Maybe?","findings":[],"question":{}}`))
	for _, p := range envelope.ProblemsOf(err) {
		fmt.Println(p)
	}
	// Output:
	// 895 sha256:0db384ab1b682c115d79babfefa91f014ad80c007d00c79119d748f32be232d1
	// ENV_MISSING_MEMBER $.recommendations: required member is absent
	// ENV_MISSING_MEMBER $.offer: required member is absent
	// ENV_MISSING_MEMBER $.question.stem: required member is absent
	// ENV_MISSING_MEMBER $.question.options: required member is absent
	// ENV_MISSING_MEMBER $.question.recommended_idx: required member is absent
	// ENV_MISSING_MEMBER $.question.hatches: required member is absent
}

// ParseSpec accepts what envelope-04 accepts; Parse, for an envelope actgate renders or sends,
// also applies the actgate profile. Two options with one label are well formed, and
// actgate does not show them.
func ExampleParseSpec() {
	raw, _ := os.ReadFile("testdata/conformance/envelope.canonical.json")
	raw = bytes.Replace(raw, []byte(`"Share dates and passport number"`), []byte(`"Share dates only"`), 1)

	env, err := envelope.ParseSpec(raw)
	fmt.Println(env.Digest(), err)

	_, err = envelope.Parse(raw)
	var ve *envelope.ValidationError
	fmt.Println(errors.As(err, &ve) && ve.ProfileOnly(), err)
	// Output:
	// sha256:c1e83ae42309c4e6d02995de69967d61724c5f4e74f31030f6001b782fe9a470 <nil>
	// true envelope refused by the actgate profile: ENV_DUPLICATE_LABEL $.question.options[1].label: repeats the label of option 0
}
