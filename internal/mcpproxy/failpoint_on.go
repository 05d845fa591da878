//go:build failpoints && unix

package mcpproxy

import (
	"os"
	"syscall"
)

// failpoint kills the process with SIGKILL when the environment variable ACTGATE_FAILPOINT
// names this point: a crash at exactly that instant, for the crash-recovery conformance test
// (tool-use-binding §22 T-G). It is compiled only into binaries built with -tags failpoints;
// in every other build it does nothing and the variable is never read.
func failpoint(name string) {
	if os.Getenv("ACTGATE_FAILPOINT") != name {
		return
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal cannot be caught; nothing after this point runs
}
