package main

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"

	"github.com/actgate/actgate/internal/gateconfig"
	"github.com/actgate/actgate/internal/standalone"
)

func newServeCmd(s streams) *cobra.Command {
	var (
		configFile string
		verbose    bool
	)
	cmd := &cobra.Command{
		Use:   "serve --config FILE",
		Short: "Run the gate: policy, authority, journal, receipts and the MCP proxy in one process",
		Long: `Run the standalone finality sink on the loopback address the configuration names.

Each server of the configured policy is proxied at /mcp/{server}: point the agent's MCP
client there instead of at the server. Every tools/call goes through the sink; everything else
passes through. The moments API (/v1/moments) lets the configured principals list and resolve
binding moments: see 'actgate moments' and 'actgate resolve', or the web console,
'actgate console --as PRINCIPAL'. With an approval section, the same page is also served over
the network to principals who sign in with OpenID Connect (docs/security.md "The approval
service").

State lives in the configuration's dataDir: the store (authorities and the dispatch journal),
the signed receipt log, the keys (generated on first start, mode 0600) and one token per
principal. Dispatches a previous process left in flight are marked INDETERMINATE before the
gate listens. SIGTERM or SIGINT shuts down gracefully. Logs go to stderr and carry digests,
never tool arguments. Prometheus metrics are served at /metrics on metrics.address (default
127.0.0.1:9787, "off" disables them).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := gateconfig.Load(configFile)
			if err != nil {
				return configError(err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			log := newLogger(s.err, verbose)
			rt, err := standalone.Open(ctx, cfg, log, standalone.Hooks{})
			if err != nil {
				return fail(exitRejected, "SERVE_FAILED "+err.Error())
			}
			stopMetrics, err := rt.ServeMetrics(log)
			if err != nil {
				_ = rt.Close()
				return fail(exitRejected, "SERVE_FAILED metrics.address: "+err.Error())
			}
			defer stopMetrics()
			if cfg.Approval != nil {
				if _, err := startApproval(ctx, cfg, log); err != nil {
					_ = rt.Close()
					return fail(exitRejected, "SERVE_FAILED "+err.Error())
				}
			}
			ln, err := net.Listen("tcp", cfg.Listen)
			if err != nil {
				_ = rt.Close()
				return fail(exitRejected, "SERVE_FAILED "+err.Error())
			}
			if err := rt.Serve(ctx, ln, s.out); err != nil {
				return fail(exitRejected, "SERVE_FAILED "+err.Error())
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&configFile, "config", "", "the gate's configuration file (YAML)")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "log every allowed call too")
	_ = cmd.MarkFlagRequired("config")
	return cmd
}

// configError reports a configuration file that was refused: one line per field.
func configError(err error) error {
	var es gateconfig.Errors
	if errors.As(err, &es) {
		lines := make([]string, len(es))
		for i, e := range es {
			lines[i] = "CONFIG_INVALID " + e.Error()
		}
		return fail(exitRejected, lines...)
	}
	return fail(exitRejected, "CONFIG_INVALID "+err.Error())
}

// newLogger is the gate's logr.Logger on a slog text handler.
func newLogger(w io.Writer, verbose bool) logr.Logger {
	level := slog.LevelInfo
	if verbose {
		level = slog.Level(-8)
	}
	return logr.FromSlogHandler(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}
