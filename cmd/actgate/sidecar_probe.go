package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/actgate/actgate/internal/diag"
	"github.com/actgate/actgate/internal/sidecar"
)

// probeTimeout bounds one probe request.
const probeTimeout = 2 * time.Second

// newSidecarProbeCmd is `actgate sidecar probe`: the kubelet's exec probe of the injected
// sidecar. The sidecar listens on loopback only, and an HTTP probe is sent to the pod's IP, so
// the kubelet runs this in the sidecar's container, where 127.0.0.1 is the pod's loopback.
func newSidecarProbeCmd(s streams) *cobra.Command {
	var listen, check string
	cmd := &cobra.Command{
		Use:   "probe [--check startup|ready] [--listen ADDR]",
		Short: "Probe the running sidecar on its loopback listener (the kubelet's exec probe)",
		Long: `Ask the sidecar listening on --listen whether it is ready, and exit 0 if it is.

--check ready (the readiness probe): the sidecar holds its pod's current ToolPolicy and every
upstream accepts a TCP connection. --check startup (the startup probe, which holds the agent's
containers back): the sidecar serves and holds its policy; upstreams are not checked.

The sidecar's answer (policy name, epoch, reasons; never credentials) is printed on stdout.
Exit status: 0 ready; 1 not ready or not answering; 2 usage.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := sidecar.ReadyPath
			switch check {
			case "ready":
			case "startup":
				path += "?check=policy"
			default:
				return usageError("--check must be startup or ready")
			}
			if err := sidecar.CheckLoopback(listen); err != nil {
				return usageError("--listen: %v", err)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), probeTimeout)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+listen+path, nil)
			if err != nil {
				return usageError("%v", err)
			}
			resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Do(req)
			if err != nil {
				return fail(exitRejected, "SIDECAR_NOT_READY "+err.Error())
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			// The problems first, one line each with its reason code and fix: the kubelet puts
			// this output in the pod's probe-failure Event, where a person reads it.
			reasons := writeProbeProblems(s.out, body)
			_, _ = s.out.Write(body)
			if resp.StatusCode != http.StatusOK {
				msg := fmt.Sprintf("SIDECAR_NOT_READY HTTP %d", resp.StatusCode)
				if len(reasons) > 0 {
					msg += ": " + strings.Join(reasons, ", ")
				}
				return fail(exitRejected, msg)
			}
			return nil
		},
	}
	def := os.Getenv(envListen)
	if def == "" {
		def = defaultListen
	}
	cmd.Flags().StringVar(&listen, "listen", def, "the sidecar's loopback address (env "+envListen+")")
	cmd.Flags().StringVar(&check, "check", "ready", "startup or ready")
	return cmd
}

// writeProbeProblems writes each problem of a readiness answer as one line, "REASON (subject):
// message. Fix: …", and returns the reasons. An answer that does not decode writes nothing.
func writeProbeProblems(w io.Writer, body []byte) []string {
	var b struct {
		Problems []diag.Problem `json:"problems"`
	}
	if json.Unmarshal(body, &b) != nil {
		return nil
	}
	var reasons []string
	for _, p := range b.Problems {
		fmt.Fprintln(w, diag.FormatProblem(p))
		reasons = append(reasons, diag.Safe(p.Reason))
	}
	return reasons
}
