package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/actgate/actgate/internal/review"
	"github.com/actgate/actgate/internal/version"
)

func newVersionCmd(s streams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the release, Go version and platform of this binary, and its review protocol level",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintf(s.out, "%s\n%s\n", version.String("actgate"), review.LevelLine())
			return err
		},
	}
}
