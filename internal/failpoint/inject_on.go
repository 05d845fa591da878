//go:build failpoints && unix

package failpoint

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

const enabled = true

// Inject performs the action ACTGATE_FAILPOINT selects when it names p (package
// documentation). The variable is read at each call: the tests set it per process. A value
// that does not parse kills the process at every point, so that a mistyped test fails loudly
// instead of silently testing nothing.
func Inject(p Point) error {
	v, ok := os.LookupEnv(EnvVar)
	if !ok || v == "" {
		return nil
	}
	s, err := Parse(v)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		kill()
	}
	if s.Point != p {
		return nil
	}
	switch s.Action {
	case ActionSleep:
		time.Sleep(s.Sleep)
	case ActionError:
		return fmt.Errorf("%w at %s", ErrInjected, p)
	default:
		kill()
	}
	return nil
}

// kill sends SIGKILL to this process: it cannot be caught, and nothing after it runs.
func kill() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}
