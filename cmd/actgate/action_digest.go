package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/actgate/actgate/internal/action"
)

func newActionDigestCmd(s streams) *cobra.Command {
	var (
		tool   string
		strict bool
	)
	cmd := &cobra.Command{
		Use:   "action-digest --tool NAME [--strict]",
		Short: `Print the digest of the action {"tool": NAME, "args": <stdin>}`,
		Long: `Read a tool call's argument object on stdin and print the digest of its action material
{"tool": NAME, "args": ARGS} (EP-TOOL-CALL-BINDING-v1; docs/architecture.md "The action an option
authorises").

The default is full RFC 8785, the mode of EP-TOOL-CALL-BINDING-v1, so the digest agrees with
other implementations of that family for any arguments. --strict gives the digest a
binding-moment option carries (envelope-04 §5.6): arguments outside the strict profile are
refused, because they cannot be bound to a human decision. Inside the profile both modes
print the same digest.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			raw, err := readAll(s.in, "stdin")
			if err != nil {
				return err
			}
			d, err := action.Digest(tool, raw, mode(strict))
			if err != nil {
				return fail(exitRejected, actionLine(err))
			}
			_, err = fmt.Fprintln(s.out, d)
			return err
		},
	}
	cmd.Flags().StringVar(&tool, "tool", "", "the tool name (required)")
	cmd.Flags().BoolVar(&strict, "strict", false, "apply the strict profile of envelope-04 §6.3 (human-bound actions)")
	_ = cmd.MarkFlagRequired("tool")
	return cmd
}

// actionLine formats a refusal by internal/action as "CODE $: message"; the argument
// object on stdin is "$".
func actionLine(err error) string {
	if c, ok := action.CodeOf(err); ok {
		return fmt.Sprintf("%s $: %s", c, strings.TrimPrefix(err.Error(), string(c)+": "))
	}
	return jcsLine(err)
}
