// Package admission decides who may talk to the gate, for every request of every revision before
// anything reads it: the DNS rebinding refusal on a loopback listener (RefuseRebinding,
// RebindingHeader, Rebinding), the agents' authentication (AgentAuthenticator, BearerAgents,
// Authenticate, AgentOf, SDKAuth) and the bound on the sessions agents hold open
// (SessionLimiter). internal/mcpproxy applies it first in Proxy.ServeHTTP and re-exports the
// types its configuration names; this package imports wire and agentoauth only.
package admission

import (
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// RefuseRebinding refuses, before anything reads the request, one that reached a loopback
// listener under a Host that is not loopback, or with an Origin whose host is not loopback
// ("null" included): a page of another site whose name a DNS rebinding points at the loopback
// address (MCP 2025-11-25 basic/security_best_practices "Local MCP Server Compromise";
// basic/transports: servers MUST validate the Origin header). It applies to every request of
// every revision — initialize and a session's requests, a 2026-07-28 server/discover or
// tools/call, a GET stream, a resumption, a DELETE — with HTTP 403 and EF_HOST_REFUSED
// (docs/api.md "MCP through the gate"). A listener that is not loopback is not checked here.
func RefuseRebinding(w http.ResponseWriter, r *http.Request) bool {
	what := RebindingHeader(r)
	if what == "" {
		return false
	}
	w.Header().Set("Content-Type", wire.MediaJSON)
	w.WriteHeader(http.StatusForbidden)
	_ = json.NewEncoder(w).Encode(map[string]string{"code": string(ef.EFHostRefused),
		"message": "Forbidden: the " + what + " header does not name the gate's loopback address (DNS rebinding protection)"})
	return true
}

// RebindingHeader names the header ("Host" or "Origin") that shows r reached a loopback
// listener from a page of another site (the DNS rebinding RefuseRebinding refuses), or "" when
// r is admissible (or the listener is not loopback). The host-loop endpoint (internal/hostloop)
// applies the same test.
func RebindingHeader(r *http.Request) string {
	if !onLoopback(r) {
		return ""
	}
	what := ""
	if !isLoopback(r.Host) {
		what = "Host"
	}
	for _, o := range r.Header.Values("Origin") {
		if !loopbackOrigin(o) {
			what = "Origin"
		}
	}
	return what
}

// loopbackOrigin reports whether an Origin header value is scheme://host[:port] with a loopback
// host (localhost or a loopback IP).
func loopbackOrigin(v string) bool {
	u, err := url.Parse(v)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil {
		return false
	}
	return isLoopback(u.Host)
}

// Rebinding reports whether r reached a loopback listener under a Host name that is not
// loopback. Proxy.ServeHTTP refuses such requests before any path sees them
// (RefuseRebinding); the paths keep the test as a second line.
func Rebinding(r *http.Request) bool {
	return onLoopback(r) && !isLoopback(r.Host)
}

// onLoopback reports whether r reached a loopback listener.
func onLoopback(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return ok && local != nil && isLoopback(local.String())
}

// isLoopback is the SDK's test (internal/util.IsLoopback): localhost or a loopback IP, with or
// without a port.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
