package console

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// DefaultAddress is where a console listens unless told otherwise: loopback, a free port.
const DefaultAddress = "127.0.0.1:0"

// ErrNotLoopback: the console was asked to listen on, or was reached through, an address that
// is not loopback.
var ErrNotLoopback = errors.New("the console listens on loopback only")

// Listen opens a TCP listener on address, which must name a loopback IP address
// (127.0.0.0/8 or ::1) or "localhost" (resolved to 127.0.0.1). Anything else, including an
// empty host or a wildcard, is refused with ErrNotLoopback: the console resolves binding
// moments with the principal's own credential and must not be reachable from elsewhere
// (envelope-04 §12.4).
func Listen(address string) (net.Listener, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("console address %q: %w", address, err)
	}
	if strings.EqualFold(host, "localhost") {
		host = "127.0.0.1"
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("%w: %q is not a loopback address (use 127.0.0.1 or [::1])", ErrNotLoopback, address)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), port))
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	return ln, nil
}

// loopbackHost reports whether a Host header (host or host:port) names the loopback
// interface. The console answers only such requests, so a DNS name rebound to 127.0.0.1 by
// a hostile page cannot reach it.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && ip.IsLoopback()
}
