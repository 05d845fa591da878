package conformance

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"testing"

	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/test/testutil/rig"
)

// upstreamProcessEnv makes the test binary, re-executed by BenchmarkToolsCallRoundTripServe,
// serve the conformance policy's tools upstream in a process of its own instead of running
// tests: agent, gate and upstream are then three processes, as deployed. Its value is the one
// MCP revision the upstream speaks.
const upstreamProcessEnv = "ACTGATE_CONFORMANCE_UPSTREAM_PROCESS"

// reverseProxyEnv makes the re-executed test binary a plain HTTP reverse proxy to the URL it
// names (BenchmarkToolsCallRoundTripReverseProxy).
const reverseProxyEnv = "ACTGATE_CONFORMANCE_REVERSE_PROXY"

// echoProcessEnv makes the re-executed test binary a TCP echo server
// (BenchmarkLoopbackRoundTrip).
const echoProcessEnv = "ACTGATE_CONFORMANCE_ECHO_PROCESS"

func TestMain(m *testing.M) {
	if v := os.Getenv(upstreamProcessEnv); v != "" {
		os.Exit(serveUpstreamProcess(v))
	}
	if os.Getenv(echoProcessEnv) != "" {
		os.Exit(serveEchoProcess())
	}
	if target := os.Getenv(reverseProxyEnv); target != "" {
		os.Exit(serveReverseProxy(target))
	}
	os.Exit(m.Run())
}

// serveReverseProxy forwards every request to target's host, prints the URL that reaches
// target through it on stdout and serves until stdin closes.
func serveReverseProxy(target string) int {
	u, err := url.Parse(target)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	rp.FlushInterval = -1 // stream event-stream responses as they come
	// The upstream process exits first at the end, cutting the agent's open event stream;
	// that is not news.
	rp.ErrorLog = log.New(io.Discard, "", 0)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go func() { _ = http.Serve(ln, rp) }()
	fmt.Printf("http://%s%s\n", ln.Addr(), u.Path)
	_, _ = os.Stdin.Read(make([]byte, 1))
	return 0
}

// serveUpstreamProcess runs the tools upstream, prints its URL on stdout and serves until stdin
// closes (the parent exited or closed it).
func serveUpstreamProcess(version string) int {
	s, err := mcptest.Start(rig.EchoTools("search", "ticket_create", "email_send"), mcptest.Options{
		Name: "tools", ProtocolVersions: []string{version},
		Stateless: version >= "2026-07-28", // the revision without sessions (SEP-2575)
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer s.Close()
	fmt.Println(s.URL)
	_, _ = os.Stdin.Read(make([]byte, 1))
	return 0
}

// serveEchoProcess prints the address of a TCP echo server (every byte read is written back)
// on stdout and serves until stdin closes.
func serveEchoProcess() int {
	ln, err := listenEcho()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer ln.Close()
	fmt.Println(ln.Addr().String())
	_, _ = os.Stdin.Read(make([]byte, 1))
	return 0
}

// listenEcho starts a loopback TCP echo server in this process.
func listenEcho() (net.Listener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln, nil
}
