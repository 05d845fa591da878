package cli

import (
	"bytes"
	"errors"
	"testing"

	"github.com/spf13/cobra"
)

func TestExecute(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		runE   error
		status int
		stderr string
	}{
		{"success", nil, nil, ExitOK, ""},
		{"a coded failure prints its lines", nil, Fail(ExitRejected, "CODE_A one", "CODE_B two"), ExitRejected, "CODE_A one\nCODE_B two\n"},
		{"a usage error", nil, UsageError("--x %d", 1), ExitUsage, "USAGE --x 1\n"},
		{"any other error is usage", nil, errors.New("boom"), ExitUsage, "USAGE boom\nRun 'tool --help' for usage.\n"},
		{"an unknown flag is usage", []string{"--nope"}, nil, ExitUsage, "USAGE unknown flag: --nope\nRun 'tool --help' for usage.\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			root := &cobra.Command{Use: "tool", SilenceErrors: true, SilenceUsage: true,
				RunE: func(*cobra.Command, []string) error { return tc.runE }}
			root.SetErr(&stderr)
			if got := Execute(root, tc.args, &stderr); got != tc.status || stderr.String() != tc.stderr {
				t.Fatalf("Execute = %d, stderr %q; want %d, %q", got, stderr.String(), tc.status, tc.stderr)
			}
		})
	}
}
