package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/actgate/actgate/internal/version"
)

func newVersionCmd(s streams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the release, Go version and platform of this binary",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(s.out, version.String("actgate-controlplane"))
			return err
		},
	}
}
