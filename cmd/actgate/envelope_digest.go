package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newEnvelopeDigestCmd(s streams) *cobra.Command {
	return &cobra.Command{
		Use:   "digest",
		Short: "Print the envelope digest: sha256 over JCS(binding_moment) (envelope-04 §6)",
		Long: `Print the envelope digest of envelope-04 §6: "sha256:" and 64 lowercase hex digits over the
JCS canonical form of the binding_moment value only, not the enclosing tool result. Every
envelope envelope-04 accepts has a digest, within the actgate profile or not; a malformed
envelope has none: it is rejected.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			env, err := readEnvelope(s, false)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(s.out, env.Digest())
			return err
		},
	}
}
