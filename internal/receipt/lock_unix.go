//go:build unix

package receipt

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockFile takes an exclusive advisory lock on f, so that a second writer (another process, or
// a second Open in this one) cannot fork the chain. The lock goes with the descriptor.
func lockFile(f *os.File) error {
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("%w: %s", ErrLocked, f.Name())
		}
		return fmt.Errorf("%w: locking %s: %v", ErrFailed, f.Name(), err)
	}
	return nil
}
