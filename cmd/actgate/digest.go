package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/actgate/actgate/internal/jcs"
)

func newDigestCmd(s streams) *cobra.Command {
	var strict bool
	cmd := &cobra.Command{
		Use:   "digest [--strict]",
		Short: "Print sha256:<hex> of the canonical form of the JSON on stdin",
		Long: `Print "sha256:" and the 64 lowercase hex digits of the SHA-256 of the RFC 8785 canonical
bytes of the JSON value on stdin (envelope-04 §6.2 form). --strict as for "actgate jcs".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			raw, err := readAll(s.in, "stdin")
			if err != nil {
				return err
			}
			_, d, err := jcs.CanonicalDigest(raw, mode(strict))
			if err != nil {
				return fail(exitRejected, jcsLine(err))
			}
			_, err = fmt.Fprintln(s.out, d)
			return err
		},
	}
	cmd.Flags().BoolVar(&strict, "strict", false, "apply the strict profile of envelope-04 §6.3")
	return cmd
}
