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
	if raw == "" {
		return "", fmt.Errorf("empty destination")
	}
	if len(raw) > 2048 {
		return "", fmt.Errorf("destination longer than 2048 bytes")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("destination is not a URL")
	}
	if u.Scheme == "" || u.Host == "" || u.Opaque != "" {
		return "", fmt.Errorf("destination is not an absolute URL with a host")
	}
	scheme := strings.ToLower(u.Scheme)
	host := strings.ToLower(u.Hostname())
	if host == "" {
		return "", fmt.Errorf("destination has an empty host")
	}
	if strings.Contains(host, ":") { // IPv6 literal
		host = "[" + host + "]"
	}
	port := u.Port()
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	if port != "" {
		return scheme + "://" + host + ":" + port, nil
	}
	return scheme + "://" + host, nil
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
