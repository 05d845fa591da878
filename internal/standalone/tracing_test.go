package standalone

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/actgate/actgate/internal/gateconfig"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/test/testutil"
)

// otlpReceiver is an OTLP/HTTP traces endpoint on loopback: it decodes each binary-protobuf
// ExportTraceServiceRequest with the OTLP collector types.
type otlpReceiver struct {
	mu       sync.Mutex
	resource []*commonpb.KeyValue
	spans    []*tracepb.Span
	errs     []string
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	defer o.mu.Unlock()
	body, _ := io.ReadAll(r.Body)
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		o.errs = append(o.errs, fmt.Sprintf("%s %s %s", r.Method, r.URL.Path, r.Header.Get("Content-Type")))
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	var req collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		o.errs = append(o.errs, err.Error())
		http.Error(w, "bad protobuf", http.StatusBadRequest)
		return
	}
	for _, rs := range req.ResourceSpans {
		o.resource = rs.GetResource().GetAttributes()
		for _, ss := range rs.ScopeSpans {
			o.spans = append(o.spans, ss.Spans...)
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	b, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	_, _ = w.Write(b)
}

func otlpAttr(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.Key == key {
			switch v := kv.Value.Value.(type) {
			case *commonpb.AnyValue_StringValue:
				return v.StringValue
			case *commonpb.AnyValue_BoolValue:
				return fmt.Sprint(v.BoolValue)
			}
		}
	}
	return ""
}

type traceparentTransport string

func (tp traceparentTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("traceparent", string(tp))
	return http.DefaultTransport.RoundTrip(r)
}

// TestServeExportsSpansOverOTLP: `actgate serve` with a tracing section exports the spans of a
// call to a real OTLP/HTTP receiver: one trace of the gate's own whose root, the proxy's span,
// links the agent's traceparent, with the proxy, sink, policy and upstream spans, the call's attributes, the gate's service.name, and no
// argument value in any attribute.
func TestServeExportsSpansOverOTLP(t *testing.T) {
	const (
		traceID = "0af7651916cd43dd8448eb211c80319c"
		parent  = "b7ad6b7169203331"
		secret  = "acct-secret-argument-value-93b1"
	)
	recv := &otlpReceiver{}
	collector := httptest.NewServer(recv) // 127.0.0.1
	t.Cleanup(collector.Close)
	up, err := mcptest.Start([]mcptest.Tool{{Name: "get_balance"}}, mcptest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })

	dir := t.TempDir()
	tok := testutil.WriteFile(t, dir, "finance.token", []byte("tok\n"))
	doc := string(testConfig(up.URL, filepath.Join(dir, "data"), tok))
	doc = strings.Replace(doc, "  name: test-agent\n", "  name: test-agent\n  authentication: none\n", 1)
	doc += fmt.Sprintf("tracing:\n  endpoint: %q\n  sampleRatio: 1\n", collector.URL+"/v1/traces")
	cfg, err := gateconfig.Parse([]byte(doc), dir)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := Open(context.Background(), cfg, logr.Discard(), Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	gate := httptest.NewServer(rt.Handler())
	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint:   gate.URL + mcpproxy.Path("finance"),
		HTTPClient: &http.Client{Transport: traceparentTransport("00-" + traceID + "-" + parent + "-01")},
	}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_balance", Arguments: json.RawMessage(`{"account":"` + secret + `"}`)})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	if up.Count("get_balance") != 1 {
		t.Fatalf("upstream called %d times", up.Count("get_balance"))
	}
	_ = cs.Close()
	gate.Close()
	if err := rt.Close(); err != nil { // flushes the batch to the receiver
		t.Fatal(err)
	}

	recv.mu.Lock()
	defer recv.mu.Unlock()
	if len(recv.errs) > 0 {
		t.Fatalf("receiver refused exports: %v", recv.errs)
	}
	if got := otlpAttr(recv.resource, "service.name"); got != gateconfig.DefaultTracingServiceName {
		t.Errorf("service.name = %q", got)
	}
	byName := map[string]*tracepb.Span{}
	var gateTrace []byte
	for _, s := range recv.spans {
		if s.Name == "tools/call get_balance" && s.Kind == tracepb.Span_SPAN_KIND_SERVER {
			gateTrace = s.TraceId
		}
	}
	for _, s := range recv.spans {
		if hex.EncodeToString(s.TraceId) == traceID || string(s.TraceId) != string(gateTrace) {
			t.Errorf("span %s in trace %x, want the gate's %x (not the agent's)", s.Name, s.TraceId, gateTrace)
		}
		for _, kv := range s.Attributes {
			if strings.Contains(kv.String(), secret) {
				t.Errorf("span %s attribute %s carries the argument value", s.Name, kv.Key)
			}
		}
		// The conventions name the agent's call (server) and the upstream call (client) alike.
		name := s.Name
		if s.Kind == tracepb.Span_SPAN_KIND_CLIENT {
			name += " (client)"
		}
		byName[name] = s
	}
	for _, n := range []string{"tools/call get_balance", "actgate.sink.handle", "actgate.policy.evaluate", "tools/call get_balance (client)"} {
		if byName[n] == nil {
			t.Fatalf("no span %s received; got %d spans", n, len(recv.spans))
		}
	}
	proxy, handle := byName["tools/call get_balance"], byName["actgate.sink.handle"]
	for _, sp := range []*tracepb.Span{proxy, byName["tools/call get_balance (client)"]} {
		if otlpAttr(sp.Attributes, "mcp.method.name") != "tools/call" || otlpAttr(sp.Attributes, "gen_ai.tool.name") != "get_balance" ||
			otlpAttr(sp.Attributes, "gen_ai.operation.name") != "execute_tool" {
			t.Errorf("span %s (%v) lacks the MCP semantic conventions' attributes: %v", sp.Name, sp.Kind, sp.Attributes)
		}
	}
	if len(proxy.ParentSpanId) != 0 || proxy.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("proxy span parent %x kind %v, want a root server span", proxy.ParentSpanId, proxy.Kind)
	}
	if l := proxy.Links; len(l) != 1 || hex.EncodeToString(l[0].TraceId) != traceID || hex.EncodeToString(l[0].SpanId) != parent ||
		otlpAttr(l[0].Attributes, "actgate.link") != "agent" {
		t.Errorf("proxy span links %v, want one to the agent's span %s/%s", l, traceID, parent)
	}
	if string(handle.ParentSpanId) != string(proxy.SpanId) || string(byName["tools/call get_balance (client)"].ParentSpanId) != string(handle.SpanId) {
		t.Errorf("spans are not nested proxy > sink > upstream")
	}
	for k, want := range map[string]string{
		"actgate.tool": "get_balance", "actgate.server": "finance", "actgate.consequence_class": "INFORMATIONAL",
		"actgate.decision": "Allow", "actgate.allowed": "true", "actgate.invoked": "true",
	} {
		if got := otlpAttr(handle.Attributes, k); got != want {
			t.Errorf("sink span %s = %q, want %q", k, got, want)
		}
	}
	if otlpAttr(handle.Attributes, "actgate.act.id") == "" || otlpAttr(handle.Attributes, "actgate.action_digest") == "" {
		t.Errorf("sink span lacks act id or action digest: %v", handle.Attributes)
	}
}
