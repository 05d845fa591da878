//go:build !unix

package receipt

import "os"

// lockFile is a no-op where flock(2) does not exist; one writer per log is then the
// deployment's job.
func lockFile(*os.File) error { return nil }
