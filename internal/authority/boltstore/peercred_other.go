//go:build !linux

package boltstore

import "net"

// checkPeer relies on the socket's 0600 mode where SO_PEERCRED is not available.
func checkPeer(net.Conn) error { return nil }
