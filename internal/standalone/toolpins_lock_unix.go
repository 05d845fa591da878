//go:build unix

package standalone

import (
	"os"
	"syscall"
)

// lockPins takes an exclusive advisory lock on f (blocking), so that the gate recording a
// first use and `actgate tools accept` never lose each other's write.
func lockPins(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }
