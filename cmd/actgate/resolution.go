package main

import "github.com/spf13/cobra"

func newResolutionCmd(s streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "resolution",
		Short: "Check binding-moment resolutions (envelope-04 §7.3)",
		Args:  cobra.NoArgs,
		RunE:  showHelp,
	}
	cmd.AddCommand(
		newResolutionCheckCmd(s),
	)
	return cmd
}
