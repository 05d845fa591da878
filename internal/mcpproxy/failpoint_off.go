//go:build !failpoints || !unix

package mcpproxy

// failpoint does nothing: crash injection exists only in -tags failpoints test builds.
func failpoint(string) {}
