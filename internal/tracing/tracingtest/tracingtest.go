// Package tracingtest holds what tests of actgate's spans share: reading an attribute of a
// recorded span and rendering recorded spans as a tree for the test log.
package tracingtest

import (
	"fmt"
	"sort"
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

// SpanTree renders spans as an indented tree, children under their parent in the order they
// started, for the test log: name, kind, duration, the service.name of the span's process when
// it has one (not the SDK's unknown_service default), and the call's tool, decision, EF code and
// outcome attributes.
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
	for _, c := range children {
		sort.SliceStable(c, func(i, j int) bool { return c[i].StartTime().Before(c[j].StartTime()) })
	}
	var b strings.Builder
	var walk func(parent string, depth int)
	walk = func(parent string, depth int) {
		for _, s := range children[parent] {
			fmt.Fprintf(&b, "%s%s [%s] %s", strings.Repeat("  ", depth), s.Name(), s.SpanKind(), s.EndTime().Sub(s.StartTime()).Round(time.Microsecond))
			if svc := serviceName(s); svc != "" && !strings.HasPrefix(svc, "unknown_service") {
				fmt.Fprintf(&b, " (%s)", svc)
			}
			for _, kv := range s.Attributes() {
				switch string(kv.Key) {
				case "actgate.tool", "actgate.review.operation", "actgate.decision", "actgate.ef_code", "actgate.outcome":
					if v := kv.Value.String(); v != "" {
						fmt.Fprintf(&b, " %s=%s", kv.Key, v)
					}
				}
			}
			b.WriteString("\n")
			walk(s.SpanContext().SpanID().String(), depth+1)
		}
	}
	walk("", 0)
	return b.String()
}

func serviceName(s sdktrace.ReadOnlySpan) string {
	if r := s.Resource(); r != nil {
		if v, ok := r.Set().Value("service.name"); ok {
			return v.AsString()
		}
	}
	return ""
}
