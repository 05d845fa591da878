package main

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/actgate/actgate/internal/policytest"
)

// FuzzParseTestFile: any bytes either parse into a test file whose every case is well formed,
// or are refused with one of the test-file codes; never a panic.
//
//	go test -fuzz FuzzParseTestFile ./cmd/actgate
func FuzzParseTestFile(f *testing.F) {
	for _, p := range []string{"../../config/samples/tests/toolpolicy-payments.yaml", "../../testdata/gate/tests/actgate.yaml"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, tc := range badTestFiles() {
		if len(tc.doc) < 4096 {
			f.Add([]byte(tc.doc))
		}
	}
	f.Add([]byte("apiVersion: cli.actgate.io/v1alpha1\nkind: PolicyTest\npolicy: {toolPolicy: p}\ncases: [{name: a, call: {server: s, tool: t, agent: a, arguments: {x: [1, 2.5, null]}}, expect: {decision: escalate, principals: [a], minPrincipals: -3}}]\n"))
	f.Add([]byte("&a [*a]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tf, err := policytest.Parse(data, "f.yaml")
		if err != nil {
			var te *policytest.Error
			if !errors.As(err, &te) {
				t.Fatalf("error without a code: %v", err)
			}
			switch te.Code {
			case policytest.CodeFileInvalid, policytest.CodeCaseInvalid, policytest.CodePolicyInvalid:
			default:
				t.Fatalf("unexpected code %s", te.Code)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("a multi-line error: %q", err)
			}
			return
		}
		if len(tf.Cases) == 0 || len(tf.Cases) > policytest.MaxCases {
			t.Fatalf("%d cases accepted", len(tf.Cases))
		}
		if (tf.Policy.ToolPolicy == "") == (tf.Policy.GateConfig == "") {
			t.Fatalf("policy ref %+v accepted", tf.Policy)
		}
		for _, c := range tf.Cases {
			if c.Name == "" || policytest.CheckCall(&c.Call) != nil || policytest.CheckExpect(&c.Expect) != nil {
				t.Fatalf("malformed case accepted: %+v", c)
			}
			if !policytest.IsDecision(c.Expect.Decision) {
				t.Fatalf("decision %q accepted", c.Expect.Decision)
			}
		}
	})
}
