package diag

import (
	"encoding/json"
	"regexp"
	"strings"
	"unicode/utf8"
)

// FormatProblem is the one-line form of a problem that `actgate sidecar probe` prints and the
// kubelet copies into the pod's probe-failure Event: "REASON (subject): message. Fix: fix".
func FormatProblem(p Problem) string {
	line := p.Reason + " (" + p.Subject + "): " + p.Message
	if p.Fix != "" {
		line += ". Fix: " + p.Fix
	}
	return Safe(line)
}

// maxProbeOutput bounds what ParseProbeOutput reads, and maxProblems the problems it returns.
const (
	maxProbeOutput = 16 << 10
	maxProblems    = 32
)

var problemLine = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9]{0,63}) \(([^()]{1,253})\): (.*)$`)

// ParseProbeOutput reads the problems back from a probe's output, as a probe-failure Event
// carries it ("Readiness probe failed: " and the output): the readiness answer's JSON when a
// line holds it whole, else the problem lines. Event messages are written by whoever may create
// Events, so the text is untrusted: it is bounded, and what does not parse is ignored.
func ParseProbeOutput(s string) []Problem {
	if len(s) > maxProbeOutput {
		s = s[:maxProbeOutput]
	}
	var fromLines []Problem
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if _, rest, ok := strings.Cut(line, "probe failed: "); ok && !strings.HasPrefix(line, "{") {
			line = rest
		}
		if strings.HasPrefix(line, "{") {
			var b struct {
				Problems []Problem `json:"problems"`
			}
			if json.Unmarshal([]byte(line), &b) == nil && len(b.Problems) > 0 {
				return clean(b.Problems)
			}
			continue
		}
		m := problemLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		msg, fix, _ := strings.Cut(m[3], ". Fix: ")
		fromLines = append(fromLines, Problem{Reason: m[1], Subject: m[2], Message: msg, Fix: fix})
	}
	return clean(fromLines)
}

// clean bounds the problems and makes their strings terminal-safe.
func clean(ps []Problem) []Problem {
	if len(ps) > maxProblems {
		ps = ps[:maxProblems]
	}
	out := make([]Problem, 0, len(ps))
	for _, p := range ps {
		if p.Reason == "" || p.Subject == "" {
			continue
		}
		out = append(out, Problem{Reason: clipTo(Safe(p.Reason), 64), Subject: clipTo(Safe(p.Subject), 253),
			Message: clipTo(Safe(p.Message), 1024), Fix: clipTo(Safe(p.Fix), 1024)})
	}
	return out
}

// clipTo bounds s to n bytes, at a rune boundary.
func clipTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
