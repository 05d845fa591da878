package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/actgate/actgate/internal/envelope"
)

// profileNote ends each stderr line that names a rule of the actgate profile an otherwise
// valid envelope breaks.
const profileNote = " (actgate profile: well formed, but actgate does not render or send it)"

func newEnvelopeValidateCmd(s streams) *cobra.Command {
	var profile bool
	cmd := &cobra.Command{
		Use:   "validate [--profile]",
		Short: `Check the envelope on stdin; print "valid <digest>" or every problem`,
		Long: `Check the envelope on stdin against envelope-04 and print "valid <digest>", or every problem
on stderr with exit status 1.

A well-formed envelope outside the actgate profile (what actgate renders or sends) is valid:
the exit status is 0, and stderr has one line per profile rule it breaks, beginning with its
code. With --profile those are rejections (exit status 1), as for render.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			env, err := readEnvelope(s, profile)
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(s.out, "valid %s\n", env.Digest()); err != nil {
				return err
			}
			for _, p := range envelope.ProblemsOf(env.CheckProfile()) {
				fmt.Fprintln(s.err, p.String()+profileNote)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&profile, "profile", false, "also apply the actgate profile; an envelope outside it is rejected")
	return cmd
}
