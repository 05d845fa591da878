package main

import (
	"github.com/spf13/cobra"

	"github.com/actgate/actgate/internal/jcs"
)

func mode(strict bool) jcs.Mode {
	if strict {
		return jcs.Strict
	}
	return jcs.Full
}

func newJCSCmd(s streams) *cobra.Command {
	var strict bool
	cmd := &cobra.Command{
		Use:   "jcs [--strict]",
		Short: "Print the RFC 8785 canonical form of the JSON on stdin",
		Long: `Print the RFC 8785 (JCS) canonical bytes of the JSON value on stdin, exactly, with no
newline added, so "actgate jcs | sha256sum" agrees with "actgate digest".

--strict applies the profile of envelope-04 §6.3: duplicate member names (after escape
decoding), unpaired surrogates, numbers that are not integers of magnitude at most 2^53-1,
and nesting deeper than 64 are rejected. Full mode rejects duplicates and invalid JSON and
formats every finite number per RFC 8785.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			raw, err := readAll(s.in, "stdin")
			if err != nil {
				return err
			}
			c, err := jcs.Canonicalize(raw, mode(strict))
			if err != nil {
				return fail(exitRejected, jcsLine(err))
			}
			_, err = s.out.Write(c)
			return err
		},
	}
	cmd.Flags().BoolVar(&strict, "strict", false, "apply the strict profile of envelope-04 §6.3")
	return cmd
}
