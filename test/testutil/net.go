package testutil

import (
	"net"
	"testing"
)

// FreeAddr returns a loopback address whose port was free a moment ago, for a process that
// must be told its listen address before it starts.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
