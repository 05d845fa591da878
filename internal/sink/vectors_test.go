package sink

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/jcs"
	"github.com/actgate/actgate/internal/journal"
)

type bindingVector struct {
	ID           string          `json:"id"`
	Tool         string          `json:"tool"`
	Args         json.RawMessage `json:"args"`
	ExpectedCAID string          `json:"expected_caid"`
}

func loadBindingVectors(t *testing.T) []bindingVector {
	t.Helper()
	b, err := os.ReadFile("testdata/tool-call-binding.v1.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Version string          `json:"@version"`
		Vectors []bindingVector `json:"vectors"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Version != "EP-TOOL-CALL-BINDING-v1" || len(doc.Vectors) != 6 {
		t.Fatalf("unexpected vector file: %s, %d vectors", doc.Version, len(doc.Vectors))
	}
	return doc.Vectors
}

// TestToolCallBindingVectors: the action digest the sink binds a live call to (journaled with
// the consumed authority) is EP-TOOL-CALL-BINDING-v1's, so authorities and receipts agree with
// other implementations of the family (docs/architecture.md "The action an option authorises").
func TestToolCallBindingVectors(t *testing.T) {
	for _, v := range loadBindingVectors(t) {
		t.Run(v.ID, func(t *testing.T) {
			want := "sha256:" + v.ExpectedCAID[strings.LastIndex(v.ExpectedCAID, ":")+1:]
			f := newFixture(t)
			f.policy.rules = append(f.policy.rules, tableRule{tool: v.Tool, outcome: PolicyPermit})
			res := f.handle(call("s1", "tools", v.Tool, string(v.Args)))
			if !res.Invoked || res.State != journal.StateExecuted {
				t.Fatalf("%+v", res)
			}
			rec, err := f.store.Record(context.Background(), res.OperationID)
			if err != nil {
				t.Fatal(err)
			}
			if rec.ActionDigest != want {
				t.Fatalf("journaled action digest %s, vector %s", rec.ActionDigest, want)
			}
			// The same call offered in a binding moment carries the same action_digest, unless
			// its arguments are outside the strict profile and cannot be bound to a human.
			p := proposal(
				Option{Label: "This call", Reasoning: "r", Tool: v.Tool, Server: "tools", Args: v.Args},
				Option{Label: "Pay", Reasoning: "r", Tool: "payout_create", Server: "pay", Args: json.RawMessage(`{"amount":1}`)})
			mr, err := f.gate.RequestMoment(context.Background(), "s1", agentID, p)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := jcs.Canonicalize(v.Args, jcs.Strict); err != nil {
				wantDeny(t, mr, ef.EFArgumentsOutOfProfile)
				return
			}
			if mr.Moment == nil {
				t.Fatalf("moment refused: %+v", mr)
			}
			if o, _ := mr.Moment.Envelope.Option(0); o.ActionDigest != want {
				t.Fatalf("option action_digest %s, vector %s", o.ActionDigest, want)
			}
		})
	}
}
