package main

import (
	"errors"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/actgate/actgate/internal/envelope"
)

// renderers lists the formats of "envelope render"; add terminal or HTML here.
func renderers() map[string]envelope.Renderer {
	return map[string]envelope.Renderer{
		"text": envelope.TextRenderer{},
	}
}

func newEnvelopeRenderCmd(s streams) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "render [--format text]",
		Short: "Render the envelope on stdin for a principal (envelope-04 §9)",
		Long: `Render the envelope on stdin keeping every invariant of envelope-04 §9.1: all four briefing
slots, the recommended option marked, each option's reasoning, an affordance per open hatch
and one to decline.

A malformed envelope is never rendered as a decision (§12.8), and neither is a well-formed
one outside the actgate profile: the fallback rendering (§9.3) is printed instead, with the
tool result's conventional payload when there is one, the problems go to stderr (the
profile's codes for the latter), and the exit status is 1.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rs := renderers()
			r, ok := rs[format]
			if !ok {
				names := make([]string, 0, len(rs))
				for n := range rs {
					names = append(names, n)
				}
				sort.Strings(names)
				return usageError("--format %q: formats are %s", format, strings.Join(names, ", "))
			}
			raw, err := readAll(s.in, "stdin")
			if err != nil {
				return err
			}
			env, perr := envelope.ParseDocument(raw)
			if perr == nil {
				return r.Render(s.out, env)
			}
			payload := ""
			if _, p, ferr := envelope.FromToolResult(raw); !errors.Is(ferr, envelope.ErrNoEnvelope) {
				payload = p
			}
			if err := r.RenderFallback(s.out, payload, envelope.ProblemsOf(perr)); err != nil {
				return err
			}
			return fail(exitRejected, problemLines(perr, "")...)
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "output format: text")
	return cmd
}
