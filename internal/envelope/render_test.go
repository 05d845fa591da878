package envelope

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/*.txt from the renderer's output")

// renderDocument renders a file the way a surface would: a tool result through
// RenderToolResult, a bare envelope through Render, or its fallback when malformed.
// Files named toolresult-*.json are tool results.
func renderDocument(t *testing.T, name string, raw []byte) string {
	t.Helper()
	var buf bytes.Buffer
	if strings.HasPrefix(name, "toolresult-") {
		err := RenderToolResult(TextRenderer{}, &buf, raw)
		if err != nil && ProblemsOf(err) == nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	env, err := Parse(raw)
	if err != nil {
		if rerr := (TextRenderer{}).RenderFallback(&buf, "", ProblemsOf(err)); rerr != nil {
			t.Fatal(rerr)
		}
		return buf.String()
	}
	if err := (TextRenderer{}).Render(&buf, env); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func TestTextRendererGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/render/*.json")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no render inputs: %v", err)
	}
	want := map[string]bool{}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".json")
		golden := filepath.Join("testdata", "golden", name+".txt")
		want[golden] = true
		t.Run(name, func(t *testing.T) {
			got := renderDocument(t, name, readFile(t, in))
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			exp, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("missing golden file (run go test ./internal/envelope -run TestTextRendererGolden -update): %v", err)
			}
			if string(exp) != got {
				t.Errorf("stale golden %s (rerun with -update after checking the diff)\n--- got ---\n%s\n--- want ---\n%s", golden, got, exp)
			}
		})
	}
	// A golden file without an input is stale too.
	goldens, _ := filepath.Glob("testdata/golden/*.txt")
	for _, g := range goldens {
		if !want[g] {
			t.Errorf("orphan golden file %s has no testdata/render input", g)
		}
	}
}

// TestTextRendererInvariants checks envelope-04 §9.1 on every well-formed render input,
// independently of the golden bytes.
func TestTextRendererInvariants(t *testing.T) {
	inputs, _ := filepath.Glob("testdata/render/*.json")
	checked := 0
	for _, in := range inputs {
		env, err := ParseDocument(readFile(t, in))
		if err != nil {
			continue
		}
		checked++
		t.Run(filepath.Base(in), func(t *testing.T) {
			var buf bytes.Buffer
			if err := (TextRenderer{}).Render(&buf, env); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			c := env.Content()
			mustContain := func(what, s string) {
				t.Helper()
				if !strings.Contains(out, s) {
					t.Errorf("%s missing: %q", what, s)
				}
			}
			// All four briefing slots.
			mustContain("synopsis", c.Synopsis)
			for _, f := range c.Findings {
				mustContain("finding", f)
			}
			for _, r := range c.Recommendations {
				mustContain("recommendation", r)
			}
			mustContain("offer", c.Offer)
			mustContain("stem", c.Question.Stem)
			// Each option with its reasoning, the recommended one visibly marked, no other.
			lines := strings.Split(out, "\n")
			for i, o := range c.Question.Options {
				head := fmt.Sprintf("[%d] %s", i+1, o.Label)
				idx := -1
				for j, l := range lines {
					if strings.Contains(l, head) {
						idx = j
					}
				}
				if idx < 0 {
					t.Fatalf("option %d not rendered", i)
				}
				marked := strings.HasPrefix(lines[idx], "*") && strings.HasSuffix(lines[idx], "(recommended)")
				if marked != (i == c.Question.RecommendedIdx) {
					t.Errorf("option %d marked=%v, recommended_idx=%d", i, marked, c.Question.RecommendedIdx)
				}
				if !strings.Contains(lines[idx+1], o.Reasoning) {
					t.Errorf("option %d reasoning not with the option: %q", i, lines[idx+1])
				}
			}
			// One affordance per true hatch, none for a false one, and always decline.
			if strings.Contains(out, "[a] ") != c.Question.Hatches.FreeText {
				t.Errorf("free_text=%v but affordance rendered=%v", c.Question.Hatches.FreeText, !c.Question.Hatches.FreeText)
			}
			if strings.Contains(out, "[q] ") != c.Question.Hatches.Dialogue {
				t.Errorf("dialogue=%v but affordance rendered=%v", c.Question.Hatches.Dialogue, !c.Question.Hatches.Dialogue)
			}
			mustContain("decline", "[d] Decline")
			mustContain("digest", env.Digest())
		})
	}
	if checked < 5 {
		t.Fatalf("only %d well-formed render inputs checked", checked)
	}
}

func TestFallbackNeverOffersADecision(t *testing.T) {
	// §12.8: a malformed envelope is discarded, never rendered partially or repaired.
	raw := readFile(t, "testdata/render/toolresult-malformed.json")
	var buf bytes.Buffer
	err := RenderToolResult(TextRenderer{}, &buf, raw)
	if !HasCode(err, CodeOptionCount) {
		t.Fatalf("err = %v", err)
	}
	out := buf.String()
	for _, s := range []string{"[1]", "[d] Decline", "(recommended)", "Share dates only"} {
		if strings.Contains(out, s) {
			t.Errorf("fallback shows decision element %q:\n%s", s, out)
		}
	}
	if !strings.Contains(out, "The booking service needs traveller details") {
		t.Errorf("fallback lacks the conventional payload:\n%s", out)
	}
}

func TestFallbackSanitizesPayload(t *testing.T) {
	var buf bytes.Buffer
	err := (TextRenderer{}).RenderFallback(&buf, "ok\x1b[2J\u202etxt\nnext\tcol", nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(buf.String(), "\x1b\u202e") || !strings.Contains(buf.String(), "next\tcol") {
		t.Errorf("payload not sanitized: %q", buf.String())
	}
}

func TestRenderNil(t *testing.T) {
	if err := (TextRenderer{}).Render(&bytes.Buffer{}, nil); err == nil {
		t.Fatal("nil envelope rendered")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestRenderWriteError(t *testing.T) {
	if err := (TextRenderer{}).Render(failWriter{}, exampleEnvelope(t)); err == nil {
		t.Fatal("write error swallowed")
	}
}
