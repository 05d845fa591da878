package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newEnvelopeValidateCmd(s streams) *cobra.Command {
	return &cobra.Command{
		Use:   "validate",
		Short: `Check the envelope on stdin; print "valid <digest>" or every problem`,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			env, _, err := readEnvelope(s)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(s.out, "valid %s\n", env.Digest())
			return err
		},
	}
}
