// Package mcptest runs real MCP servers (the official Go SDK over streamable HTTP on a loopback
// port) that count their own invocations, for the proxy's tests, the conformance tests and
// `actgate demo`. The counts are the upstream's own: what a test asserts about "was the tool
// called" is read from here, never from the gate.
package mcptest

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Handler runs one call of a tool with its raw arguments.
type Handler func(ctx context.Context, args json.RawMessage) (*mcp.CallToolResult, error)

// Tool is one tool of the server.
type Tool struct {
	Name        string
	Description string
	// InputSchema is the tool's JSON Schema; nil means {"type":"object"}.
	InputSchema json.RawMessage
	Annotations *mcp.ToolAnnotations
	// Handler runs the call; nil answers {"ok":true} as text.
	Handler Handler
}

// Options tune a Server.
type Options struct {
	// Name is the server's implementation name; default "mcptest".
	Name string
	// Instructions are returned by initialize.
	Instructions string
	// Samples adds a resource (mcptest://readme), a resource template and a prompt (greet),
	// for pass-through tests.
	Samples bool
	// Intercept, when set, sees every HTTP request first; returning true means it answered.
	Intercept func(w http.ResponseWriter, r *http.Request) bool
	// Addr is the listen address; default 127.0.0.1:0.
	Addr string
	// JSONResponse answers POSTed requests with application/json instead of an event stream;
	// Stateless serves without sessions (no Mcp-Session-Id). The SDK's StreamableHTTPOptions
	// of the same names.
	JSONResponse, Stateless bool
	// EventStore gives the server's streams event ids and Last-Event-ID resumption (an
	// in-memory event store).
	EventStore bool
	// ProtocolVersions, when not empty, are the only MCP revisions the server negotiates (the
	// SDK's ServerOptions.SupportedProtocolVersions); empty means every revision the SDK speaks.
	ProtocolVersions []string
}

// Call is one invocation as the upstream saw it.
type Call struct {
	Tool        string
	Args        json.RawMessage
	Meta        map[string]any
	OperationID string // params._meta["actgate.io/operation-id"]
}

// Server is a running MCP server.
type Server struct {
	// URL is the streamable-HTTP endpoint.
	URL string

	srv  *http.Server
	ln   net.Listener
	mcp  *mcp.Server
	done chan struct{}

	mu     sync.Mutex
	calls  []Call
	auth   []string
	closed bool
}

// Start runs a server with the given tools on a loopback port.
func Start(tools []Tool, opts Options) (*Server, error) {
	if opts.Name == "" {
		opts.Name = "mcptest"
	}
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	s := &Server{done: make(chan struct{})}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: opts.Name, Version: "v0.0.1"}, &mcp.ServerOptions{
		Instructions: opts.Instructions, SupportedProtocolVersions: opts.ProtocolVersions,
	})
	for _, t := range tools {
		s.addTool(t)
	}
	if opts.Samples {
		s.addSamples()
	}
	hopts := &mcp.StreamableHTTPOptions{JSONResponse: opts.JSONResponse, Stateless: opts.Stateless}
	if opts.EventStore {
		hopts.EventStore = mcp.NewMemoryEventStore(nil)
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, hopts)
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, err
	}
	s.ln = ln
	s.URL = "http://" + ln.Addr().String() + "/mcp"
	s.srv = &http.Server{
		ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.mu.Lock()
			s.auth = append(s.auth, r.Header.Get("Authorization"))
			s.mu.Unlock()
			if opts.Intercept != nil && opts.Intercept(w, r) {
				return
			}
			h.ServeHTTP(w, r)
		}),
	}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

func (s *Server) addTool(t Tool) {
	schema := t.InputSchema
	if schema == nil {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	h := t.Handler
	if h == nil {
		h = func(context.Context, json.RawMessage) (*mcp.CallToolResult, error) { return Text(`{"ok":true}`), nil }
	}
	name := t.Name
	s.mcp.AddTool(&mcp.Tool{Name: name, Description: t.Description, InputSchema: schema, Annotations: t.Annotations},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			c := Call{Tool: name, Args: append(json.RawMessage(nil), req.Params.Arguments...), Meta: req.Params.Meta}
			if req.Params.Meta != nil {
				c.OperationID, _ = req.Params.Meta["actgate.io/operation-id"].(string)
			}
			s.mu.Lock()
			s.calls = append(s.calls, c)
			s.mu.Unlock()
			return h(ctx, req.Params.Arguments)
		})
}

func (s *Server) addSamples() {
	s.mcp.AddResource(&mcp.Resource{URI: "mcptest://readme", Name: "readme", Title: "Read me", MIMEType: "text/plain",
		Description: "A sample resource.", Meta: mcp.Meta{"vendor.example/tag": "sample"}},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: "hello from the upstream"}}}, nil
		})
	s.mcp.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "mcptest://items/{id}", Name: "item", MIMEType: "application/json"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "application/json", Text: `{"item":true}`}}}, nil
		})
	s.mcp.AddPrompt(&mcp.Prompt{Name: "greet", Title: "Greet", Description: "Greets someone.",
		Arguments: []*mcp.PromptArgument{{Name: "who", Description: "whom to greet", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Description: "a greeting", Messages: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.TextContent{Text: "Say hello to " + req.Params.Arguments["who"] + "."}},
			}}, nil
		})
}

// Text is a successful result with one text block.
func Text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// ErrorText is an isError result with one text block.
func ErrorText(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}, IsError: true}
}

// Count returns how many times the server ran tool ("" = every tool).
func (s *Server) Count(tool string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		if tool == "" || c.Tool == tool {
			n++
		}
	}
	return n
}

// Calls returns every invocation the server ran, oldest first.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// Authorizations returns the Authorization header of every HTTP request the server received.
func (s *Server) Authorizations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.auth...)
}

// MCP returns the SDK server, e.g. to add tools or send notifications.
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Close stops the server, dropping open connections.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	for ss := range s.mcp.Sessions() {
		_ = ss.Close()
	}
	err := s.srv.Close()
	<-s.done
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
