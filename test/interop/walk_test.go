package interop

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// transcript is walk.mjs's output.
type transcript struct {
	Features []struct {
		Feature string          `json:"feature"`
		OK      bool            `json:"ok"`
		Value   json.RawMessage `json:"value"`
		Error   json.RawMessage `json:"error"`
	} `json:"features"`
	HTTP []struct {
		Method      string `json:"method"`
		RPC         string `json:"rpc"`
		Status      int    `json:"status"`
		ContentType string `json:"contentType"`
		EventIDs    *bool  `json:"eventIds"`
	} `json:"http"`
}

// The gate's documented additions, which normalization removes from the gated transcript: the
// virtual tool and the advisory annotation in tools/list (docs/api.md "MCP through the gate").
const (
	virtualTool    = "request_binding_moment"
	annotationName = "emits_binding_moment"
)

// volatile features carry values the server makes up on each call (get-structured-content's
// weather is random): they compare by shape, every string and number replaced by its type.
var volatile = map[string]bool{"content: structured (outputSchema)": true}

// made matches what server-everything makes up on each call, the same direct and gated only by
// chance: UUIDs (URL elicitation ids) and clock times (its dynamic resources' text).
var made = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\d{1,2}:\d{2}:\d{2}( [AP]M)?`)

// runWalk runs walk.mjs against url and returns its normalized transcript.
func runWalk(t *testing.T, url string) map[string]string {
	t.Helper()
	return runWalkScript(t, "walk.mjs", url)
}

// runWalkScript runs a walk (walk.mjs, walk2.mjs) whose first argument is the URL and returns its
// normalized transcript: feature (or HTTP exchange) -> what was seen.
func runWalkScript(t *testing.T, script, url string, args ...string) map[string]string {
	t.Helper()
	out, err := runNode(t, 3*time.Minute, append([]string{script, url}, args...)...)
	if err != nil {
		t.Fatalf("walk %s: %v", url, err)
	}
	if dir := os.Getenv("ACTGATE_INTEROP_OUT"); dir != "" { // the raw transcripts, to read
		name := strings.NewReplacer(":", "_", "/", "_").Replace(strings.TrimPrefix(url, "http://")+" "+strings.Join(args, " ")) + ".json"
		_ = os.WriteFile(filepath.Join(dir, name), out, 0o600)
	}
	var tr transcript
	if err := json.Unmarshal(out, &tr); err != nil {
		t.Fatalf("walk %s: output is not a transcript: %v\n%s", url, err, tail(string(out), 2000))
	}
	res := map[string]string{}
	for _, f := range tr.Features {
		v := f.Value
		if !f.OK {
			v = f.Error
		}
		var doc any
		if len(v) > 0 {
			if err := json.Unmarshal(v, &doc); err != nil {
				t.Fatal(err)
			}
		}
		if f.Feature == "tools/list" {
			doc = withoutAdditions(doc)
		}
		if volatile[f.Feature] {
			doc = shape(doc)
		}
		b, _ := json.Marshal(doc)
		b = made.ReplaceAll(b, []byte("<made up>"))
		verdict := "ok"
		if !f.OK {
			verdict = "error"
		}
		res[f.Feature] = verdict + " " + string(b)
	}
	exchanges := map[string]map[string]bool{}
	for _, h := range tr.HTTP {
		key := "http: " + h.Method
		if h.RPC != "" {
			key += " " + h.RPC
		}
		v := fmt.Sprintf("%d %s", h.Status, h.ContentType)
		if h.EventIDs != nil && *h.EventIDs {
			v += " ids"
		}
		if exchanges[key] == nil {
			exchanges[key] = map[string]bool{}
		}
		exchanges[key][v] = true
	}
	for k, vs := range exchanges {
		var list []string
		for v := range vs {
			list = append(list, v)
		}
		sort.Strings(list)
		res[k] = strings.Join(list, "; ")
	}
	return res
}

// withoutAdditions removes the gate's additions from a tools/list value.
func withoutAdditions(doc any) any {
	tools, ok := doc.([]any)
	if !ok {
		return doc
	}
	out := tools[:0:0]
	for _, tl := range tools {
		m, ok := tl.(map[string]any)
		if !ok {
			out = append(out, tl)
			continue
		}
		if m["name"] == virtualTool {
			continue
		}
		for _, member := range []string{"annotations", "_meta"} {
			if obj, ok := m[member].(map[string]any); ok {
				delete(obj, annotationName)
				if len(obj) == 0 {
					delete(m, member)
				}
			}
		}
		out = append(out, m)
	}
	return out
}

// shape replaces every string and number of doc with its type's name.
func shape(doc any) any {
	switch v := doc.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = shape(e)
		}
		return v
	case []any:
		for i, e := range v {
			v[i] = shape(e)
		}
		return v
	case string:
		return "<string>"
	case float64:
		return "<number>"
	}
	return doc
}

// walk compares the feature walk of server-everything directly and through the gate.
func walk(t *testing.T, direct, gated string) {
	walkOf(t, "server-everything 2026.8.31", "walk/", direct, gated)
}

// walkOf compares the feature walk of a server directly and through the gate, its rows named
// prefix + feature in knownDifferences.
func walkOf(t *testing.T, server, prefix, direct, gated string) {
	compareWalks(t, "TypeScript SDK 1.32 feature walk of "+server, prefix, runWalk(t, direct), runWalk(t, gated))
}

// walk2Of compares walk2.mjs (the TypeScript SDK v2 client in one revision, PLAN's tools) of a
// server directly and through the gate, its rows named prefix + feature.
func walk2Of(t *testing.T, server, prefix, revision, plan, direct, gated string) {
	d := runWalkScript(t, "walk2.mjs", direct, revision, plan)
	g := runWalkScript(t, "walk2.mjs", gated, revision, plan)
	compareWalks(t, "TypeScript SDK 2.4.0 feature walk at "+revision+" of "+server, prefix, d, g)
}

func compareWalks(t *testing.T, title, prefix string, d, g map[string]string) {
	t.Helper()
	keys := map[string]bool{}
	for k := range d {
		keys[k] = true
	}
	for k := range g {
		keys[k] = true
	}
	var rows []row
	for k := range keys {
		dv, dok := d[k]
		gv, gok := g[k]
		rows = append(rows, row{name: k, direct: dv, gated: gv, same: dok && gok && dv == gv})
	}
	report(t, title, prefix, rows)
}
