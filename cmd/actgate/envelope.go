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
exact member set and slot grammar (§4-§5); every problem is reported.

validate and digest accept every envelope envelope-04 accepts. render also applies the
actgate profile, the limits of what actgate shows a principal (non-empty single-line text
within its length bound, at most 16 findings and 16 recommendations, no two options with
one label or one action_digest): a well-formed envelope outside it is not rendered as a
decision. "validate --profile" checks the profile too.`,
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

// readEnvelope reads the envelope document on stdin and validates it against envelope-04,
// and against the actgate profile too when profile is true.
func readEnvelope(s streams, profile bool) (*envelope.Envelope, error) {
	raw, err := readAll(s.in, "stdin")
	if err != nil {
		return nil, err
	}
	parse := envelope.ParseDocumentSpec
	if profile {
		parse = envelope.ParseDocument
	}
	env, err := parse(raw)
	if err != nil {
		return nil, fail(exitRejected, problemLines(err, "")...)
	}
	return env, nil
}
