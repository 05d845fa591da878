package policy

import (
	"fmt"
	"net/url"
	"strings"
)

// origin returns the origin "scheme://host[:port]" of an absolute URL or origin: scheme and host
// lowercased, the scheme's default port (http 80, https 443) dropped, path, query, fragment and
// user information ignored. It is the identity a destination is compared by: ToolServer.url's
// origin is the destination every authority for the server is bound to (tool-use-binding §22
// T-D), and a focused origin is what a computer-use submit is bound to (§12
// COMPUTER_USE_ORIGIN_CHANGE). Hosts are compared as written: no DNS, no IDNA mapping, no
// trailing-dot folding, so two spellings of one host are two destinations (fail closed).
func origin(raw string) (string, error) {
	o, _, err := endpoint(raw)
	return o, err
}

// endpoint is origin and the URL's path as written (escaped), "/" for an empty path. A server's
// endpoint is its origin and path: an MCP server is one URL (streamable HTTP has a single
// endpoint), so another path at the same origin is another server (tool-use-binding §13:
// "a swapped server with the same tool name fails sink or destination match").
func endpoint(raw string) (string, string, error) {
	if raw == "" {
		return "", "", fmt.Errorf("empty destination")
	}
	if len(raw) > 2048 {
		return "", "", fmt.Errorf("destination longer than 2048 bytes")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", fmt.Errorf("destination is not a URL")
	}
	if u.Scheme == "" || u.Host == "" || u.Opaque != "" {
		return "", "", fmt.Errorf("destination is not an absolute URL with a host")
	}
	scheme := strings.ToLower(u.Scheme)
	host := strings.ToLower(u.Hostname())
	if host == "" {
		return "", "", fmt.Errorf("destination has an empty host")
	}
	if strings.Contains(host, ":") { // IPv6 literal
		host = "[" + host + "]"
	}
	port := u.Port()
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	if port != "" {
		return scheme + "://" + host + ":" + port, path, nil
	}
	return scheme + "://" + host, path, nil
}

// httpOrigin is origin restricted to http and https, for configuration (server URLs,
// destination allowlists), which the API restricts to those schemes.
func httpOrigin(raw string) (string, error) {
	o, err := origin(raw)
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(o, "http://") && !strings.HasPrefix(o, "https://") {
		return "", fmt.Errorf("scheme must be http or https")
	}
	return o, nil
}
