package envelope

// Bounds of the actgate profile. envelope-04 §5 states what each slot carries (one sentence,
// one line, a short label) without numbers; these are the numbers actgate enforces so a
// principal is never shown a decision that does not fit a screen, and so parsers of
// untrusted bytes are bounded. Every one of them is a rejection, never a truncation
// (envelope-04 §12.7: rejections rather than repairs).
const (
	// MaxDocumentBytes bounds an envelope or a tool result carrying one, in bytes.
	MaxDocumentBytes = 256 << 10
	// MaxResolutionBytes bounds a resolution document, in bytes.
	MaxResolutionBytes = 64 << 10
	// MaxActionBytes bounds an action object {"tool","args"}, in bytes.
	MaxActionBytes = 4 << 20

	// MinOptions and MaxOptions are envelope-04 §5.6 ("at least two and at most four").
	MinOptions = 2
	MaxOptions = 4

	// MaxFindings and MaxRecommendations bound slots 2 and 3; each needs at least one entry.
	// §5.2 and §5.3 recommend 3–6 and 2–4 entries; those are advice, not enforced.
	MaxFindings        = 16
	MaxRecommendations = 16

	// MaxTextRunes bounds synopsis, each finding and recommendation, offer, stem, each
	// option's reasoning and meta.calibration_note, in Unicode code points.
	MaxTextRunes = 500
	// MaxLabelRunes bounds an option label ("a short, action-shaped statement", §5.6).
	MaxLabelRunes = 120
	// MaxDecisionClassRunes bounds meta.decision_class (§5.9).
	MaxDecisionClassRunes = 64
	// MaxAnswerRunes bounds the free-form answer of an answer-space resolution (§7.3).
	MaxAnswerRunes = 4000
	// MaxToolNameBytes bounds a tool name in an action object (MCP tool names are 1–128).
	MaxToolNameBytes = 128
)
