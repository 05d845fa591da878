package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

)

// newBudgetsCmd is `actgate budgets`: the budgets of a running standalone gate (docs/api.md
// "Budgets").
func newBudgetsCmd(s streams) *cobra.Command {
	var (
		f      apiFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "budgets [--server URL] [--as PRINCIPAL]",
		Short: "Show each budget's spending at a running gate: spent, remaining, window end",
		Long: `List every budget ledger of a running 'actgate serve' that still counts something: one row
per policy rule budget and key, with the calls and the sum spent in the current window, the
limits, what remains, when the window ends, and how many charges are not settled yet (in flight
or INDETERMINATE: they count until reconciled). A call that ended FAILED is not counted.

The caller is authenticated as for 'actgate moments' (a principal's token file in the gate's
data dir).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			budgets, err := c.Budgets(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(s.out)
				enc.SetIndent("", "  ")
				return enc.Encode(budgets)
			}
			if len(budgets) == 0 {
				_, err := fmt.Fprintln(s.out, "No budget has spending in its current window.")
				return err
			}
			w := tabwriter.NewWriter(s.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "POLICY\tRULE\tBUDGET\tKEY\tCALLS\tREMAINING\tSPENT\tREMAINING\tWINDOW END\tUNSETTLED")
			for _, b := range budgets {
				calls, rc := fmt.Sprint(b.Calls), "-"
				if b.MaxCalls > 0 {
					calls, rc = fmt.Sprintf("%d/%d", b.Calls, b.MaxCalls), fmt.Sprint(b.RemainingCalls)
				}
				spent, ra := "-", "-"
				if b.MaxSum != "" {
					spent, ra = b.Amount+"/"+b.MaxSum+unitSuffix(b.Unit), b.RemainingAmount+unitSuffix(b.Unit)
				}
				fmt.Fprintf(w, "%s/%s\t%s\t%s\t%q\t%s\t%s\t%s\t%s\t%s\t%d\n", b.Namespace, b.Policy, b.Rule, b.Budget, b.Key,
					calls, rc, spent, ra, b.WindowEnd.UTC().Format(time.RFC3339), b.Unsettled)
			}
			return w.Flush()
		},
	}
	f.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the API's JSON")
	return cmd
}

func unitSuffix(u string) string {
	if u == "" {
		return ""
	}
	return " " + u
}
