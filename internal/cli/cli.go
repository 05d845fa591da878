// Package cli holds what every actgate command binary shares: the exit statuses, the error
// that carries one with the lines to print, and the execution of a cobra root that turns
// errors into those statuses. The statuses are a public interface (cmd/actgate's doc).
package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// Exit statuses of every actgate command.
const (
	ExitOK           = 0
	ExitRejected     = 1
	ExitUsage        = 2
	ExitNotAuthority = 3
)

// ExitError ends a command with a status and the lines to print on stderr, each beginning
// with a stable code.
type ExitError struct {
	Status int
	Lines  []string
}

func (e *ExitError) Error() string { return strings.Join(e.Lines, "; ") }

// Fail returns an ExitError with the status and lines.
func Fail(status int, lines ...string) error { return &ExitError{Status: status, Lines: lines} }

// UsageError is an ExitUsage error whose line begins USAGE.
func UsageError(format string, args ...any) error {
	return Fail(ExitUsage, "USAGE "+fmt.Sprintf(format, args...))
}

// Execute runs root with args and returns the exit status, printing an ExitError's lines on
// stderr. Everything cobra itself refuses (unknown command or flag, missing required flag,
// extra arguments) is a usage error, followed by a pointer to --help.
func Execute(root *cobra.Command, args []string, stderr io.Writer) int {
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if !errors.As(err, &ee) {
		ee = UsageError("%s", err.Error()).(*ExitError)
		fmt.Fprintf(stderr, "%s\nRun '%s --help' for usage.\n", ee.Lines[0], root.Name())
		return ee.Status
	}
	for _, l := range ee.Lines {
		fmt.Fprintln(stderr, l)
	}
	return ee.Status
}
