package rig

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"

	"github.com/actgate/actgate/internal/authority/boltstore"
	"github.com/actgate/actgate/internal/gateconfig"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/sink"
	"github.com/actgate/actgate/internal/standalone"
)

// Gate is the standalone gate of a configuration, in-process: internal/standalone's runtime,
// what `actgate serve` runs (store, receipt log, sink, one MCP proxy per server, moments API),
// served on a loopback port until the test ends.
type Gate struct {
	T testing.TB
	// Store and Sink are the runtime's store (authorities and journal) and sink.
	Store *boltstore.Store
	Sink  *sink.Gate
	// Up are the upstreams the gate was started with (Start); nil from StartGate.
	Up *Upstreams
	// URL is the gate's base URL (http://127.0.0.1:PORT).
	URL string
	rt  *standalone.Runtime
}

// Start runs the three Upstreams (samples: with mcptest's samples) and the gate of the
// configuration file at path rendered for them (Config) on a fresh data dir.
func Start(t testing.TB, path string, samples bool) *Gate {
	t.Helper()
	u := StartUpstreams(t, samples)
	cfg, err := gateconfig.Parse(Config(t, path, u, filepath.Join(t.TempDir(), "data")), "")
	if err != nil {
		t.Fatal(err)
	}
	g := StartGate(t, cfg)
	g.Up = u
	return g
}

// StartGate opens and serves the gate of cfg; it stops (gracefully, closing the runtime) when
// t ends.
func StartGate(t testing.TB, cfg *gateconfig.Config) *Gate {
	t.Helper()
	rt, err := standalone.Open(context.Background(), cfg, logr.Discard(), standalone.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = rt.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Serve(ctx, ln, io.Discard) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return &Gate{T: t, Store: rt.Store(), Sink: rt.Gate(), URL: "http://" + ln.Addr().String(), rt: rt}
}

// Runtime is the gate's runtime.
func (g *Gate) Runtime() *standalone.Runtime { return g.rt }

// Endpoint is the agent-facing MCP endpoint of a server.
func (g *Gate) Endpoint(server string) string { return g.URL + mcpproxy.Path(server) }

// Proxy is an MCP proxy of the gate for server, contacting url (the policy's, or a swapped
// one), closed when the test ends.
func (g *Gate) Proxy(server, url string) *mcpproxy.Proxy {
	g.T.Helper()
	cfg := g.rt.Config()
	cred, err := cfg.Upstream(server).Credential()
	if err != nil {
		g.T.Fatal(err)
	}
	var credOrigin string
	for _, s := range cfg.Policy.Servers {
		if s.Name == server {
			credOrigin = s.URL // the credential belongs to the policy's server, wherever the proxy points
		}
	}
	p, err := mcpproxy.New(mcpproxy.Config{Server: server, URL: url, Gate: g.rt.Gate(), Agent: cfg.Agent.Name,
		Credential: cred, CredentialOrigin: credOrigin, TrustDeclaredProvenance: cfg.Agent.TrustDeclaredProvenance,
		CallTimeout: cfg.Timeout()})
	if err != nil {
		g.T.Fatal(err)
	}
	g.T.Cleanup(func() { _ = p.Close() })
	return p
}

// Swapped serves the proxy of server as if its upstream were url, and returns its endpoint.
func (g *Gate) Swapped(server, url string) string {
	g.T.Helper()
	mux := http.NewServeMux()
	mux.Handle(mcpproxy.Path(server), g.Proxy(server, url))
	s := httptest.NewServer(mux)
	g.T.Cleanup(s.Close)
	return s.URL + mcpproxy.Path(server)
}
