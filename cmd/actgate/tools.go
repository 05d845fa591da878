package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/actgate/actgate/internal/gateconfig"
	"github.com/actgate/actgate/internal/standalone"
	"github.com/actgate/actgate/internal/tooldef"
)

// newToolsCmd is `actgate tools`: the pinned tool definitions of a standalone gate
// (docs/api.md "Pinned tool definitions").
func newToolsCmd(s streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tools",
		Short: "Pinned tool definitions: digest a definition, list the pins, accept a changed definition",
		Args:  cobra.NoArgs,
		RunE:  showHelp,
	}
	cmd.AddCommand(newToolsDigestCmd(s), newToolsListCmd(s), newToolsAcceptCmd(s))
	return cmd
}

// dataDirFlags locate a standalone gate's data dir as `actgate moments` does.
type dataDirFlags struct{ config, dataDir string }

func (f *dataDirFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.config, "config", "", "the gate's configuration file, to find its data dir")
	cmd.Flags().StringVar(&f.dataDir, "data-dir", "", "the gate's data dir (default: $ACTGATE_DATA_DIR, else ./actgate-data)")
}

func (f *dataDirFlags) dir() (string, error) {
	if f.dataDir != "" {
		return f.dataDir, nil
	}
	if f.config != "" {
		cfg, err := gateconfig.Load(f.config)
		if err != nil {
			return "", configError(err)
		}
		return cfg.DataDir, nil
	}
	if d := os.Getenv("ACTGATE_DATA_DIR"); d != "" {
		return d, nil
	}
	return "actgate-data", nil
}

func newToolsDigestCmd(s streams) *cobra.Command {
	return &cobra.Command{
		Use:   "digest",
		Short: "Print the definition digest of each tool in the tools/list result (or the one tool object) on stdin",
		Long: `Print one line per tool, "NAME SHA256", of the tools/list result (an object with a tools
array) or the single tool object on stdin: the digest a rule's pin.digests lists. The digest is
the SHA-256 of the RFC 8785 canonical JSON of the tool's name, title, description, inputSchema,
outputSchema and annotations as the upstream wrote them (docs/api.md "Pinned tool definitions").`,
		Args: cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			raw, err := readAll(s.in, "stdin")
			if err != nil {
				return err
			}
			var doc map[string]json.RawMessage
			if err := json.Unmarshal(raw, &doc); err != nil || doc == nil {
				return fail(exitRejected, "TOOL_INVALID stdin is not a JSON object")
			}
			tools := []json.RawMessage{raw}
			if t, ok := doc["tools"]; ok {
				if err := json.Unmarshal(t, &tools); err != nil {
					return fail(exitRejected, "TOOL_INVALID tools is not an array")
				}
			}
			for i, t := range tools {
				d, err := tooldef.Parse(t)
				if err != nil {
					return fail(exitRejected, fmt.Sprintf("TOOL_INVALID tools[%d]: %v", i, err))
				}
				if _, err := fmt.Fprintf(s.out, "%s %s\n", d.Name, d.Digest); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

func newToolsListCmd(s streams) *cobra.Command {
	var f dataDirFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the accepted tool definition digests and the changed definitions awaiting acceptance",
		Args:  cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			dir, err := f.dir()
			if err != nil {
				return err
			}
			doc, err := standalone.OpenToolPins(dir).Doc()
			if err != nil {
				return fail(exitRejected, "PINS_UNREADABLE "+err.Error())
			}
			w := tabwriter.NewWriter(s.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "STATE\tSERVER\tTOOL\tSHA256\tBY\tTIME")
			for _, e := range doc.Pins {
				fmt.Fprintf(w, "accepted\t%s\t%s\t%s\t%s\t%s\n", e.Server, e.Tool, e.SHA256, e.AcceptedBy, e.Time.Format("2006-01-02T15:04:05Z"))
			}
			for _, e := range doc.Pending {
				fmt.Fprintf(w, "changed\t%s\t%s\t%s\t-\t%s\n", e.Server, e.Tool, e.SHA256, e.Time.Format("2006-01-02T15:04:05Z"))
			}
			return w.Flush()
		},
	}
	f.add(cmd)
	return cmd
}

func newToolsAcceptCmd(s streams) *cobra.Command {
	var (
		f              dataDirFlags
		server, digest string
		by             string
	)
	cmd := &cobra.Command{
		Use:   "accept TOOL --server SERVER [--digest SHA256]",
		Short: "Accept the changed definition of a pinned tool the gate saw listed",
		Long: `Accept the changed definition of TOOL on SERVER that the gate saw listed (see "actgate
tools list"): the gate lists the tool again and lets its calls through. With --digest, accept
exactly that digest: it must be the changed definition's, so a definition that changed again
after you reviewed it is not accepted; with no change pending, --digest records it outright.
A digest listed in the policy's rules[].pin.digests overrides what is accepted here: edit the
policy instead. The gate may be running: both write the data dir's tool-pins.json under a lock.`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if server == "" {
				return usageError("--server is required")
			}
			dir, err := f.dir()
			if err != nil {
				return err
			}
			if by == "" {
				by = "operator"
				if u := os.Getenv("USER"); u != "" {
					by = "operator:" + u
				}
			}
			e, err := standalone.OpenToolPins(dir).Accept(server, args[0], digest, by)
			switch {
			case errors.Is(err, standalone.ErrNoPendingChange):
				return fail(exitRejected, fmt.Sprintf("NO_CHANGE no changed definition of tool %q on server %q awaits acceptance (pass --digest to record one)", args[0], server))
			case errors.Is(err, standalone.ErrDigestNotPending):
				return fail(exitRejected, "DIGEST_MISMATCH "+err.Error())
			case err != nil:
				return fail(exitRejected, "PINS_UNWRITABLE "+err.Error())
			}
			_, err = fmt.Fprintf(s.out, "accepted %s on %s: %s\n", e.Tool, e.Server, e.SHA256)
			return err
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&server, "server", "", "the policy's server (spec.servers[].name) that lists the tool")
	cmd.Flags().StringVar(&digest, "digest", "", "the exact digest to accept (64 lowercase hex digits)")
	cmd.Flags().StringVar(&by, "as", "", "who accepts, recorded with the pin (default: operator:$USER)")
	return cmd
}
