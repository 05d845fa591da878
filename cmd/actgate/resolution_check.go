package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/actgate/actgate/internal/envelope"
)

func newResolutionCheckCmd(s streams) *cobra.Command {
	var envFile, actionFile, tool string
	cmd := &cobra.Command{
		Use:   "check --envelope FILE --action FILE [--tool NAME]",
		Short: "Exit 0 only if the resolution on stdin is authority for the action",
		Long: `Read a resolution (envelope-04 §7.3) on stdin, the envelope it resolves from --envelope
(bare, or a tool result carrying it), and the action about to run from --action. All three
are read under the strict profile (§6.3) and checked against envelope-04 alone: a
well-formed envelope or answer outside the actgate profile is checked like any other.

The action is any JSON value: envelope-04 binds an option to the digest of the action
itself (§5.6), sha256 over its JCS canonical form, whatever its shape. With --tool NAME the
file holds a tool call's argument object instead, and the action is the tool call
{"tool": NAME, "args": ARGS} (EP-TOOL-CALL-BINDING-v1), the digest "actgate action-digest
--tool NAME --strict" prints.

Exit 0, printing the grant, only when the resolution names that envelope by digest, selects
an option, and the recomputed digest of the action equals that option's action_digest
(§7.3, §12.6). A well-formed answer, question or declined resolution is never authority:
exit 3 with a line naming its kind. Another envelope, an option out of range, or a different
action: exit 3. Malformed input: exit 1.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			envRaw, err := readFile(envFile, "envelope")
			if err != nil {
				return err
			}
			actRaw, err := readFile(actionFile, "action")
			if err != nil {
				return err
			}
			resRaw, err := readAll(s.in, "stdin")
			if err != nil {
				return err
			}
			// Report every malformed input, not just the first.
			var lines []string
			env, err := envelope.ParseDocumentSpec(envRaw)
			if err != nil {
				lines = append(lines, problemLines(err, "--envelope "+envFile)...)
			}
			var act envelope.Action
			if cmd.Flags().Changed("tool") {
				act, err = envelope.ToolCall(tool, actRaw)
			} else {
				act, err = envelope.ParseAction(actRaw)
			}
			if err != nil {
				lines = append(lines, problemLines(err, "--action "+actionFile)...)
			}
			res, err := envelope.ParseResolutionSpec(resRaw)
			if err != nil {
				lines = append(lines, problemLines(err, "stdin")...)
			}
			if len(lines) > 0 {
				return fail(exitRejected, lines...)
			}
			g, err := envelope.Authorize(env, res, act)
			if err != nil {
				return fail(exitNotAuthority, problemLines(err, "")...)
			}
			_, err = fmt.Fprintf(s.out, "authority option %d action %s envelope %s\n", g.OptionIdx, g.ActionDigest, g.EnvelopeDigest)
			return err
		},
	}
	cmd.Flags().StringVar(&envFile, "envelope", "", "file holding the envelope the resolution names (required)")
	cmd.Flags().StringVar(&actionFile, "action", "", "file holding the action about to run, any JSON value; with --tool, the tool call's argument object (required)")
	cmd.Flags().StringVar(&tool, "tool", "", `the action is the tool call {"tool": NAME, "args": <the --action file>}`)
	_ = cmd.MarkFlagRequired("envelope")
	_ = cmd.MarkFlagRequired("action")
	return cmd
}
