package admission

import (
	"net/url"
	"testing"
)

// TestLoopbackOrigin: only an http or https origin whose host is localhost or a loopback IP.
func TestLoopbackOrigin(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"http://localhost", true},
		{"http://localhost:6274", true},
		{"https://127.0.0.1:8443", true},
		{"http://[::1]:80", true},
		{"http://127.8.9.10", true},
		{"null", false},
		{"", false},
		{"http://evil.example.com", false},
		{"http://localhost.evil.example.com", false},
		{"http://127.0.0.1.nip.io", false},
		{"file://localhost", false},
		{"http://user@localhost", false},
		{"http://[::ffff:7f00:1]", true},
		{"http://0.0.0.0", false},
		{"http://%zz", false},
		{"localhost:80", false},
		{"//localhost", false},
	} {
		if got := loopbackOrigin(tc.in); got != tc.ok {
			t.Errorf("loopbackOrigin(%q) = %v, want %v", tc.in, got, tc.ok)
		}
	}
}

// FuzzLoopbackOrigin: an accepted Origin always names a loopback host.
func FuzzLoopbackOrigin(f *testing.F) {
	for _, s := range []string{"http://localhost:1", "null", "http://evil.example", "http://[::1]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, origin string) {
		if !loopbackOrigin(origin) {
			return
		}
		u, err := url.Parse(origin)
		if err != nil || !isLoopback(u.Host) {
			t.Fatalf("accepted Origin %q", origin)
		}
	})
}
