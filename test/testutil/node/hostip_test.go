package node_test

import (
	"io"
	"net"
	"testing"

	"github.com/actgate/actgate/test/testutil/node"
)

// TestHostIPIsReachable: HostIP is a global IPv4 address of this machine, not the node's own
// bridge address, that a server binds and a client on the machine reaches.
func TestHostIPIsReachable(t *testing.T) {
	ip, err := node.HostIP()
	if err != nil {
		t.Fatal(err)
	}
	parsed := net.ParseIP(ip)
	if parsed == nil || parsed.To4() == nil || !parsed.IsGlobalUnicast() || ip == node.NodeIP {
		t.Fatalf("HostIP %q", ip)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("listen on HostIP: %v", err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_, _ = c.Write([]byte("ok"))
			_ = c.Close()
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if b, _ := io.ReadAll(c); string(b) != "ok" {
		t.Fatalf("read %q", b)
	}
}
