package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/actgate/actgate/internal/cli"
)

// Exit statuses, the same as every actgate command's (internal/cli).
const (
	exitRejected = cli.ExitRejected
	exitUsage    = cli.ExitUsage
)

// streams are the standard streams a command uses; tests pass buffers.
type streams struct {
	in       io.Reader
	out, err io.Writer
}

// fail is a failure of a subcommand: the lines on stderr, exit status exitRejected.
func fail(lines ...string) error { return cli.Fail(exitRejected, lines...) }

func usageError(format string, args ...any) error { return cli.UsageError(format, args...) }

func newRootCmd(s streams) *cobra.Command {
	root := &cobra.Command{
		Use:   "actgate-controlplane",
		Short: "actgate's Kubernetes control plane: the manager, the authority service and the approval service",
		Long: `actgate-controlplane runs the control-plane processes of actgate's Kubernetes
installation: manager (controllers and admission webhooks), authority (the authority
service that reviews acts and issues and consumes single-use authorities) and approval (the
page on which principals who sign in with OpenID Connect resolve binding moments). The gate, the
sidecar and the protocol CLI are in the actgate binary, which links no Kubernetes client.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.NoArgs,
		RunE:          func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetIn(s.in)
	root.SetOut(s.out)
	root.SetErr(s.err)
	root.AddCommand(newManagerCmd(s), newAuthorityCmd(s), newApprovalCmd(s), newVersionCmd(s))
	return root
}

// run executes one invocation and returns its exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return cli.Execute(newRootCmd(streams{in: stdin, out: stdout, err: stderr}), args, stderr)
}
