package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/actgate/actgate/internal/cli"
)

// Exit statuses of every actgate command (see doc.go); part of the public interface.
const (
	exitOK           = cli.ExitOK
	exitRejected     = cli.ExitRejected
	exitUsage        = cli.ExitUsage
	exitNotAuthority = cli.ExitNotAuthority
)

// maxInput bounds what a command reads from stdin or a file.
const maxInput = 64 << 20

// streams are the standard streams a command uses; tests pass buffers.
type streams struct {
	in       io.Reader
	out, err io.Writer
}

func fail(status int, lines ...string) error { return cli.Fail(status, lines...) }

func usageError(format string, args ...any) error { return cli.UsageError(format, args...) }

// newRootCmd wires every subcommand. To add one, write its constructor in its own file and
// add it to this list.
func newRootCmd(s streams) *cobra.Command {
	root := &cobra.Command{
		Use:   "actgate",
		Short: "A finality sink for AI-agent tool calls, and the protocol tools it digests through",
		Long: `actgate keeps an AI agent's tool call non-effective until single-use authority bound to
its exact arguments digest, destination and sink is verified and consumed.

The protocol commands read stdin and write stdout. On rejection they exit non-zero and
print one line per reason on stderr, beginning with its stable code. Exit status:
0 success, 1 input rejected, 2 usage, 3 (resolution check) not authority for the action.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.NoArgs,
		RunE:          showHelp,
	}
	// The shell-completion command is not part of the stable interface.
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetIn(s.in)
	root.SetOut(s.out)
	root.SetErr(s.err)
	root.AddCommand(
		newJCSCmd(s),
		newDigestCmd(s),
		newActionDigestCmd(s),
		newEnvelopeCmd(s),
		newResolutionCmd(s),
		newReceiptsCmd(s),
		newServeCmd(s),
		newDemoCmd(s),
		newMomentsCmd(s),
		newBudgetsCmd(s),
		newResolveCmd(s),
		newConsoleCmd(s),
		newSidecarCmd(s),
		newPolicyCmd(s),
		newToolsCmd(s),
		newVersionCmd(s),
		newDoctorCmd(s),
	)
	return root
}

// showHelp is the RunE of a command that only groups subcommands: with no arguments it
// prints help; with an unknown subcommand, its Args (cobra.NoArgs) refuse it first, which
// run turns into a usage error.
func showHelp(cmd *cobra.Command, _ []string) error { return cmd.Help() }

// run executes one actgate invocation and returns its exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return cli.Execute(newRootCmd(streams{in: stdin, out: stdout, err: stderr}), args, stderr)
}
