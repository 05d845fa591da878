package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/yaml"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/hostloop"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/sink"
)

// openAPIFile is the host-loop API's OpenAPI 3.1 document.
const openAPIFile = "../../api/openapi/hostloop.yaml"

const openAPIBase = "file:///hostloop.json"

// openAPIDoc is the document as JSON values (jsonschema's numbers).
func openAPIDoc(t *testing.T) map[string]any {
	t.Helper()
	y, err := os.ReadFile(openAPIFile)
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(y)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := doc.(map[string]any); ok && m["openapi"] == "3.1.0" {
		return m
	}
	t.Fatal("not an OpenAPI 3.1.0 document")
	return nil
}

// at follows a JSON pointer ("#/a/b") in doc.
func at(t *testing.T, doc map[string]any, ref string) map[string]any {
	t.Helper()
	var v any = doc
	for _, p := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		p = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%s: %q is not under an object", ref, p)
		}
		v = m[p]
	}
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s: not an object", ref)
	}
	return m
}

// deref follows $ref until a schema without one.
func deref(t *testing.T, doc, s map[string]any) map[string]any {
	for {
		r, ok := s["$ref"].(string)
		if !ok {
			return s
		}
		s = at(t, doc, r)
	}
}

// schemaType is the JSON type a Go type marshals to ("" for json.RawMessage: any JSON).
func schemaType(t reflect.Type) string {
	if t == reflect.TypeFor[json.RawMessage]() {
		return ""
	}
	switch t.Kind() {
	case reflect.Pointer:
		return schemaType(t.Elem())
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "integer"
	case reflect.Slice:
		return "array"
	case reflect.Struct, reflect.Map:
		return "object"
	}
	return "unknown " + t.String()
}

// checkMembers: every JSON member of Go type gt is a property of schema s with the type it
// marshals to, required exactly when it has no omitempty; and every property is a member.
func checkMembers(t *testing.T, doc, s map[string]any, gt reflect.Type, where string) {
	t.Helper()
	s = deref(t, doc, s)
	props, _ := s["properties"].(map[string]any)
	if s["additionalProperties"] != false {
		t.Errorf("%s: additionalProperties is not false", where)
	}
	var required []string
	for _, r := range s["required"].([]any) {
		required = append(required, r.(string))
	}
	seen := map[string]bool{}
	for i := range gt.NumField() {
		f := gt.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			t.Fatalf("%s.%s has no JSON name", where, f.Name)
		}
		seen[name] = true
		p, ok := props[name].(map[string]any)
		if !ok {
			t.Errorf("%s: member %s is not in the schema", where, name)
			continue
		}
		p = deref(t, doc, p)
		want := schemaType(f.Type)
		got, _ := p["type"].(string)
		if c, ok := p["const"]; ok && got == "" {
			got = map[bool]string{true: "boolean", false: "string"}[reflect.TypeOf(c).Kind() == reflect.Bool]
		}
		if _, oneOf := p["oneOf"]; want != "" && got != want && !(oneOf && want == "object") {
			t.Errorf("%s.%s: schema type %q, Go marshals %q", where, name, got, want)
		}
		if want == "object" && f.Type.Kind() == reflect.Struct {
			checkMembers(t, doc, p, f.Type, where+"."+name)
		}
		if want == "array" && f.Type.Elem().Kind() == reflect.Struct {
			checkMembers(t, doc, p["items"].(map[string]any), f.Type.Elem(), where+"."+name+"[]")
		}
		if req := !strings.Contains(opts, "omitempty"); req != slices.Contains(required, name) {
			t.Errorf("%s.%s: required %v in the schema, Go always marshals it: %v", where, name, !req, req)
		}
	}
	for name := range props {
		if !seen[name] {
			t.Errorf("%s: schema property %s is no member of %s", where, name, gt)
		}
	}
}

func enumOf(t *testing.T, doc map[string]any, ref string) []string {
	t.Helper()
	var out []string
	for _, v := range at(t, doc, ref)["enum"].([]any) {
		out = append(out, v.(string))
	}
	sort.Strings(out)
	return out
}

func sorted[T ~string](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = string(x)
	}
	sort.Strings(out)
	return out
}

// TestOpenAPIMatchesTypes: api/openapi/hostloop.yaml describes exactly the Go types the
// endpoint marshals (both ways), and its enums are the implementation's: vendors, EF codes,
// HOSTLOOP_* codes, journal states, outcomes.
func TestOpenAPIMatchesTypes(t *testing.T) {
	doc := openAPIDoc(t)
	for name, gt := range map[string]reflect.Type{
		"EnforceRequest":   reflect.TypeFor[hostloop.EnforceRequest](),
		"Decision":         reflect.TypeFor[hostloop.Decision](),
		"CompleteRequest":  reflect.TypeFor[hostloop.CompleteRequest](),
		"CompleteResponse": reflect.TypeFor[hostloop.CompleteResponse](),
		"ErrorResponse":    reflect.TypeFor[hostloop.ErrorResponse](),
		"Resolution":       reflect.TypeFor[sink.Delivery](),
	} {
		checkMembers(t, doc, at(t, doc, "#/components/schemas/"+name), gt, name)
	}
	var codes []ef.EFCode
	for _, i := range ef.All() {
		codes = append(codes, i.Code)
	}
	states := []journal.State{journal.StateConsumed, journal.StateDispatchPending, journal.StateInvoked, journal.StateExecuted,
		journal.StateFailed, journal.StateIndeterminate}
	for _, s := range enumOf(t, doc, "#/components/schemas/JournalState") {
		if !journal.State(s).Valid() {
			t.Errorf("JournalState %s is no journal state", s)
		}
	}
	for ref, want := range map[string][]string{
		"#/components/schemas/EFCode":                             sorted(codes),
		"#/components/schemas/ErrorCode":                          sorted(hostloop.ErrorCodes()),
		"#/components/schemas/JournalState":                       sorted(states),
		"#/components/schemas/EnforceRequest/properties/vendor":   sorted(hostloop.Vendors()),
		"#/components/schemas/CompleteRequest/properties/outcome": sorted([]hostloop.HostOutcome{hostloop.HostExecuted, hostloop.HostFailed, hostloop.HostIndeterminate}),
	} {
		if got := enumOf(t, doc, ref); !slices.Equal(got, want) {
			t.Errorf("%s: enum %v, implementation %v", ref, got, want)
		}
	}
}

// openAPIValidator compiles the document's schemas (JSON Schema 2020-12, OpenAPI 3.1's
// dialect) and validates answers against the response schema of a path and status.
type openAPIValidator struct {
	t    *testing.T
	doc  map[string]any
	c    *jsonschema.Compiler
	seen map[string]bool // "path status" validated
}

func newOpenAPIValidator(t *testing.T) *openAPIValidator {
	doc := openAPIDoc(t)
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(openAPIBase, doc); err != nil {
		t.Fatal(err)
	}
	return &openAPIValidator{t: t, doc: doc, c: c, seen: map[string]bool{}}
}

func (v *openAPIValidator) schema(ref string) *jsonschema.Schema {
	v.t.Helper()
	s, err := v.c.Compile(openAPIBase + ref)
	if err != nil {
		v.t.Fatalf("%s: %v", ref, err)
	}
	return s
}

func (v *openAPIValidator) validate(ref string, body []byte) {
	v.t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		v.t.Fatalf("%s: %v: %s", ref, err, body)
	}
	if err := v.schema(ref).Validate(inst); err != nil {
		v.t.Errorf("%s does not describe %s: %v", ref, body, err)
	}
}

// response validates an answer against the document's response of path and status (which
// the document must list).
func (v *openAPIValidator) response(path string, status int, body []byte) {
	v.t.Helper()
	resps := at(v.t, v.doc, "#/paths/"+strings.ReplaceAll(path, "/", "~1")+"/post/responses")
	if _, ok := resps[strconv.Itoa(status)].(map[string]any); !ok {
		v.t.Errorf("%s answered HTTP %d, which the document does not list", path, status)
		return
	}
	s := at(v.t, v.doc, "#/paths/"+strings.ReplaceAll(path, "/", "~1")+"/post/responses/"+strconv.Itoa(status))
	ref := "#/paths/" + strings.ReplaceAll(path, "/", "~1") + "/post/responses/" + strconv.Itoa(status) + "/content/application~1json/schema"
	if x, ok := s["$ref"].(string); ok {
		ref = x + "/content/application~1json/schema"
	}
	v.validate(ref, body)
	v.seen[fmt.Sprintf("%s %d", path, status)] = true
}

// TestOpenAPIDescribesServe: real answers of a running serve (allow, deny in each vendor
// shape, escalation, allow under authority, complete, replay, and every error status) are
// valid against the document, and so are the requests that produced them; the text inside
// each vendor-shaped deny is the document's ErrorObject.
func TestOpenAPIDescribesServe(t *testing.T) {
	v := newOpenAPIValidator(t)
	g := startHostLoopGate(t, "limits:\n  hostLoopCallsPerAgent: 1\n")
	h := g.host()
	ctx := context.Background()
	post := func(c *hostLoopClient, path, body string) (int, []byte) {
		t.Helper()
		status, b, err := c.post(ctx, path, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		v.response(path, status, b)
		return status, b
	}
	enforce := func(body string) hostloop.Decision {
		t.Helper()
		v.validate("#/components/schemas/EnforceRequest", []byte(body))
		status, b := post(h, hostloop.EnforcePath, body)
		var d hostloop.Decision
		if status != http.StatusOK || json.Unmarshal(b, &d) != nil {
			t.Fatalf("enforce: HTTP %d %s", status, b)
		}
		return d
	}
	denyText := func(d hostloop.Decision) {
		t.Helper()
		var shapes struct {
			Content any    `json:"content"`
			Output  string `json:"output"`
		}
		if err := json.Unmarshal(d.Deny, &shapes); err != nil {
			t.Fatal(err)
		}
		text := shapes.Output
		switch c := shapes.Content.(type) {
		case string:
			text = c
		case []any:
			text = c[0].(map[string]any)["text"].(string)
		}
		v.validate("#/components/schemas/ErrorObject", []byte(text))
	}

	if d := enforce(`{"vendor":"anthropic","session":"o1","block":{"type":"tool_use","id":"toolu_1","name":"get_balance","input":{"account":"main"}}}`); !d.Allow {
		t.Fatalf("allow: %+v", d)
	}
	for _, body := range []string{
		`{"vendor":"anthropic","session":"o1","provenance":"retrieval","block":{"type":"tool_use","id":"toolu_2","name":"email_send","input":{"to":"x@evil.example"}}}`,
		`{"vendor":"openai","session":"o1","provenance":"retrieval","block":{"id":"call_2","type":"function","function":{"name":"email_send","arguments":"{\"to\":\"x@evil.example\"}"}}}`,
		`{"vendor":"openai-responses","session":"o1","provenance":"retrieval","block":{"type":"function_call","id":"fc_2","call_id":"call_3","name":"email_send","arguments":"{\"to\":\"x@evil.example\"}"}}`,
		`{"vendor":"openai","session":"o1","block":{"id":"call_4","type":"function","function":{"name":"get_balance","arguments":"{"}}}`,
	} {
		d := enforce(body)
		if d.Allow || d.Code == "" {
			t.Fatalf("refusal: %+v", d)
		}
		if d.Deny != nil {
			denyText(d)
		}
	}
	pay := `{"vendor":"anthropic","session":"o2","provenance":"user","block":{"type":"tool_use","id":"toolu_3","name":"send_payment","input":{"to":"bob","amount":250}}}`
	esc := enforce(pay)
	if esc.Code != ef.EFEscalationRequired || len(esc.BindingMoments) != 1 {
		t.Fatalf("escalation: %+v", esc)
	}
	denyText(esc)
	a := g.alice()
	m, err := a.Moment(ctx, esc.BindingMoments[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Resolve(ctx, m.ID, fmt.Appendf(nil, `{"binding_moment_resolution":{"envelope_digest":%q,"resolution":"option","option_idx":0}}`, m.EnvelopeDigest)); err != nil {
		t.Fatal(err)
	}
	run := enforce(pay)
	if !run.Allow || run.OperationID == "" {
		t.Fatalf("allow under authority: %+v", run)
	}
	// At the agent's bound while the dispatch awaits its outcome: 429.
	if status, _ := post(h, hostloop.EnforcePath, `{"vendor":"anthropic","session":"o3","block":{"type":"tool_use","id":"toolu_4","name":"get_balance","input":{}}}`); status != http.StatusTooManyRequests {
		t.Fatalf("at the bound: HTTP %d", status)
	}
	complete := `{"operation_id":"` + run.OperationID + `","outcome":"executed","result":{"text":"paid"}}`
	v.validate("#/components/schemas/CompleteRequest", []byte(complete))
	if status, b := post(h, hostloop.CompletePath, complete); status != http.StatusOK {
		t.Fatalf("complete: HTTP %d %s", status, b)
	}
	if re := enforce(pay); !re.Replayed || re.Allow {
		t.Fatalf("replay: %+v", re)
	}
	// Every error status the document lists that a client can cause.
	if status, _ := post(h, hostloop.CompletePath, complete); status != http.StatusConflict {
		t.Fatalf("settled: HTTP %d", status)
	}
	if status, _ := post(h, hostloop.CompletePath, `{"operation_id":"op-never","outcome":"failed"}`); status != http.StatusNotFound {
		t.Fatalf("unknown: HTTP %d", status)
	}
	if status, _ := post(h, hostloop.EnforcePath, `{"vendor":"gemini","block":{}}`); status != http.StatusBadRequest {
		t.Fatalf("bad request: HTTP %d", status)
	}
	if status, _ := post(&hostLoopClient{base: g.base, http: &http.Client{}}, hostloop.EnforcePath, pay); status != http.StatusUnauthorized {
		t.Fatalf("no token: HTTP %d", status)
	}
	big := `{"vendor":"anthropic","block":{"x":"` + strings.Repeat("a", hostloop.MaxHostBodyBytes) + `"}}`
	if status, _ := post(h, hostloop.EnforcePath, big); status != http.StatusRequestEntityTooLarge {
		t.Fatalf("too large: HTTP %d", status)
	}
	for _, tc := range []struct {
		method, ctype string
		status        int
	}{{http.MethodGet, "", http.StatusMethodNotAllowed}, {http.MethodPost, "text/plain", http.StatusUnsupportedMediaType}} {
		req, _ := http.NewRequestWithContext(ctx, tc.method, g.base+hostloop.EnforcePath, strings.NewReader(pay))
		req.Header.Set("Authorization", "Bearer "+h.token)
		if tc.ctype != "" {
			req.Header.Set("Content-Type", tc.ctype)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Fatalf("%s %s: HTTP %d", tc.method, tc.ctype, resp.StatusCode)
		}
		v.response(hostloop.EnforcePath, resp.StatusCode, buf.Bytes())
	}
	// A page of another site through DNS rebinding: refused before anything is read, even with
	// the token.
	for _, path := range []string{hostloop.EnforcePath, hostloop.CompletePath} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.base+path, strings.NewReader(pay))
		req.Header.Set("Authorization", "Bearer "+h.token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", "http://evil.example")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(buf.String(), string(hostloop.CodeHostRefused)) {
			t.Fatalf("%s from another origin: HTTP %d %s", path, resp.StatusCode, buf.String())
		}
		v.response(path, resp.StatusCode, buf.Bytes())
	}
	for _, want := range []string{"/v1/enforce 200", "/v1/enforce 400", "/v1/enforce 401", "/v1/enforce 403", "/v1/complete 403", "/v1/enforce 405", "/v1/enforce 413", "/v1/enforce 415",
		"/v1/enforce 429", "/v1/complete 200", "/v1/complete 404", "/v1/complete 409"} {
		if !v.seen[want] {
			t.Errorf("no answer validated for %s", want)
		}
	}
	// The validator refuses what the document forbids (the test can fail).
	inst, _ := jsonschema.UnmarshalJSON(strings.NewReader(`{"allow":"yes","extra":1}`))
	if v.schema("#/components/schemas/Decision").Validate(inst) == nil {
		t.Fatal("the Decision schema accepts a malformed decision")
	}
}
