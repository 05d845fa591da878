//go:build !failpoints || !unix

package failpoint

const enabled = false

// Inject does nothing and returns nil: failures are injected only in -tags failpoints builds,
// and this one never reads the environment.
func Inject(Point) error { return nil }
