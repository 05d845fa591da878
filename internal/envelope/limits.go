package envelope

// Bounds actgate enforces. envelope-04 states what each slot carries (one sentence, one line,
// a short label) without numbers. Two kinds of bound follow, and every one is a rejection,
// never a truncation (envelope-04 §12.7: rejections rather than repairs):
//
//   - read bounds (MaxDocumentBytes, MaxResolutionBytes, MaxActionBytes): how many bytes of
//     untrusted input actgate reads at all; they apply everywhere, ParseSpec included;
//   - the actgate profile (the rest): what actgate renders or sends, so a principal is never
//     shown a decision that does not fit a screen. ParseSpec and ParseResolutionSpec do not
//     apply them; Parse, ParseResolution, Build and the renderers do (docs/api.md).
const (
	// MaxDocumentBytes bounds an envelope or a tool result carrying one, in bytes.
	MaxDocumentBytes = 256 << 10
	// MaxResolutionBytes bounds a resolution document, in bytes.
	MaxResolutionBytes = 64 << 10
	// MaxActionBytes bounds an action, or a tool call's arguments, in bytes.
	MaxActionBytes = 4 << 20

	// MinOptions and MaxOptions are envelope-04 §5.6 ("at least two and at most four").
	MinOptions = 2
	MaxOptions = 4

	// MaxFindings and MaxRecommendations bound slots 2 and 3 (actgate profile). Zero entries
	// are well formed and rendered as such; §5.2 and §5.3 recommend 3–6 and 2–4 entries,
	// which is advice, not enforced.
	MaxFindings        = 16
	MaxRecommendations = 16

	// MaxTextRunes bounds synopsis, each finding and recommendation, offer, stem, each
	// option's reasoning and meta.calibration_note, in Unicode code points (actgate profile).
	MaxTextRunes = 500
	// MaxLabelRunes bounds an option label ("a short, action-shaped statement", §5.6).
	MaxLabelRunes = 120
	// MaxDecisionClassRunes bounds meta.decision_class (§5.9).
	MaxDecisionClassRunes = 64
	// MaxAnswerRunes bounds the free-form answer of an answer resolution (§7.3).
	MaxAnswerRunes = 4000
	// MaxToolNameBytes bounds a tool name of a tool call (MCP tool names are 1–128).
	MaxToolNameBytes = 128
)
