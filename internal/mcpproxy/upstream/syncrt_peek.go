//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package upstream

import (
	"errors"
	"syscall"
)

// SyncSupported: SyncTransport's idle-connection check (peekWouldBlock) exists here.
const SyncSupported = true

// peekWouldBlock reports whether a read of socket fd would block: the peer has neither closed
// it nor sent anything. It peeks one byte without waiting and without consuming it.
func peekWouldBlock(fd uintptr) bool {
	var b [1]byte
	n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return n < 0 && (errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK))
}
