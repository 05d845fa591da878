package main

import (
	"github.com/spf13/cobra"

	"github.com/actgate/actgate/internal/envelope"
)

func newEnvelopeCmd(s streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "envelope",
		Short: "Validate, digest and render binding-moment envelopes (envelope-04)",
		Long: `Commands over binding-moment envelopes (draft-morrison-binding-moment-envelope-04). Each
reads stdin: a bare envelope, or an MCP tool result whose top-level binding_moment member
holds one (§8.1). Envelopes are read under the strict profile (§6.3) and checked for their
exact member set and slot grammar (§4-§5); every problem is reported.`,
		Args: cobra.NoArgs,
		RunE: showHelp,
	}
	cmd.AddCommand(
		newEnvelopeValidateCmd(s),
		newEnvelopeDigestCmd(s),
		newEnvelopeRenderCmd(s),
	)
	return cmd
}

// readEnvelope reads and validates the envelope document on stdin.
func readEnvelope(s streams) (*envelope.Envelope, []byte, error) {
	raw, err := readAll(s.in, "stdin")
	if err != nil {
		return nil, nil, err
	}
	env, err := envelope.ParseDocument(raw)
	if err != nil {
		return nil, raw, fail(exitRejected, problemLines(err, "")...)
	}
	return env, raw, nil
}
