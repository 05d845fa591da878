//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package upstream

// SyncSupported: without a non-blocking peek (syncrt_peek.go) an idle connection the upstream
// closed could not be told from a live one, so the direct path keeps net/http's Transport.
const SyncSupported = false

func peekWouldBlock(uintptr) bool { return false }
