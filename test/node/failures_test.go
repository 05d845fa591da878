package node_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// failures keeps each failure message of the run, so that TestNode repeats them after its
// state dump: a CI log of this suite is long, and its reader may see only the head and the
// tail.
var failures struct {
	sync.Mutex
	msgs []string
}

func noteFailure(t testing.TB, msg string) {
	failures.Lock()
	defer failures.Unlock()
	failures.msgs = append(failures.msgs, t.Name()+": "+msg)
}

// failureSummary is every failure message of the run so far, one per line.
func failureSummary() string {
	failures.Lock()
	defer failures.Unlock()
	return strings.Join(failures.msgs, "\n")
}

func errorf(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	noteFailure(t, msg)
	t.Error(msg)
}

func fatalf(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	noteFailure(t, msg)
	t.Fatal(msg)
}

func fatal(t testing.TB, args ...any) {
	t.Helper()
	msg := fmt.Sprint(args...)
	noteFailure(t, msg)
	t.Fatal(msg)
}
