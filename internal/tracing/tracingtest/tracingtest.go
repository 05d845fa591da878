// Package tracingtest holds what tests of actgate's spans share: reading an attribute of a
// recorded span and rendering recorded spans as a tree for the test log.
package tracingtest

import (
	"fmt"
	"strings"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Attr is the string value of span s's attribute key, "" when it has none.
func Attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

// SpanTree renders spans as an indented tree, children under their parent, for the test log.
func SpanTree(spans []sdktrace.ReadOnlySpan) string {
	children := map[string][]sdktrace.ReadOnlySpan{}
	ids := map[string]bool{}
	for _, s := range spans {
		ids[s.SpanContext().SpanID().String()] = true
	}
	for _, s := range spans {
		p := s.Parent().SpanID().String()
		if !ids[p] {
			p = ""
		}
		children[p] = append(children[p], s)
	}
	var b strings.Builder
	var walk func(parent string, depth int)
	walk = func(parent string, depth int) {
		for _, s := range children[parent] {
			fmt.Fprintf(&b, "%s%s [%s] %s", strings.Repeat("  ", depth), s.Name(), s.SpanKind(), s.EndTime().Sub(s.StartTime()).Round(time.Microsecond))
			for _, kv := range s.Attributes() {
				if k := string(kv.Key); k == "actgate.review.operation" || k == "actgate.decision" || k == "actgate.ef_code" || k == "actgate.outcome" {
					fmt.Fprintf(&b, " %s=%s", k, kv.Value.String())
				}
			}
			b.WriteString("\n")
			walk(s.SpanContext().SpanID().String(), depth+1)
		}
	}
	walk("", 0)
	return b.String()
}
