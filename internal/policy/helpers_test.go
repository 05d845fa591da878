package policy

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/act"
)

const samplePath = "testdata/payments.yaml"

// Live destinations of the sample's servers, as the sink reports them (the configured URL).
const (
	paymentsURL = "https://payments.example/mcp"
	mailURL     = "https://mail.example:8443/mcp"
	browserURL  = "http://browser.actgate.svc:9222"
)

func sampleSpec(t testing.TB) *v1alpha1.ToolPolicySpec {
	t.Helper()
	spec, err := LoadFile(samplePath)
	if err != nil {
		t.Fatalf("LoadFile(%s): %v", samplePath, err)
	}
	return spec
}

func compileSample(t testing.TB, mutate func(*v1alpha1.ToolPolicySpec)) *Compiled {
	t.Helper()
	spec := sampleSpec(t)
	if mutate != nil {
		mutate(spec)
	}
	c, err := Compile("shop/payments", spec, 7)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return c
}

// req builds a request on the payments server with strict user-provenance arguments; the
// options adjust it.
func req(tool string, args string, opts ...func(*Request)) Request {
	r := Request{
		Server:      "payments",
		Destination: paymentsURL,
		Tool:        tool,
		Args:        json.RawMessage(args),
		Class:       act.DefaultClass(tool),
		Provenance:  "user",
		Agent:       "system:serviceaccount:shop:agent",
		StrictArgs:  true,
	}
	for _, o := range opts {
		o(&r)
	}
	return r
}

func on(server, dest string) func(*Request) {
	return func(r *Request) { r.Server, r.Destination = server, dest }
}
func dest(d string) func(*Request)                { return func(r *Request) { r.Destination = d } }
func prov(p string) func(*Request)                { return func(r *Request) { r.Provenance = p } }
func class(c act.ConsequenceClass) func(*Request) { return func(r *Request) { r.Class = c } }
func agent(a string) func(*Request)               { return func(r *Request) { r.Agent = a } }
func notStrict(r *Request)                        { r.StrictArgs = false }

func eval(c *Compiled, r Request) Decision { return c.Evaluate(context.Background(), r) }
