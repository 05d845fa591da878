//go:build !unix

package standalone

import "os"

// lockPins is a no-op where flock(2) does not exist: run `actgate tools accept` while the gate
// is stopped there.
func lockPins(*os.File) error { return nil }
