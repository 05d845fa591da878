package policy

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// glob is a compiled rules[].tools pattern.
//
// Semantics are those the API documents for ToolRule.tools, not path.Match: `*` matches any run
// of characters including none and including '/', `?` exactly one character (one UTF-8 encoded
// rune), every other character itself, and the whole name must match, case-sensitively. MCP
// tool names may contain '/' ("github/create_issue"), and `github/*` is meant to cover them
// all; path.Match's `*` would stop at '/', and its `[...]` classes and `\` escapes are outside
// the API's pattern alphabet, so Compile rejects them rather than giving them a meaning.
type glob struct {
	pattern string
	kind    globKind
}

type globKind uint8

const (
	globExact globKind = iota // no wildcard: string equality
	globAll                   // "*" alone (or only stars): every name
	globWild                  // anything else
)

// maxGlobLen bounds a pattern (the CRD's items MaxLength).
const maxGlobLen = 128

// compileGlob validates a pattern against the API's alphabet `^[A-Za-z0-9_.:/*?-]+$`.
func compileGlob(p string) (glob, error) {
	if p == "" {
		return glob{}, fmt.Errorf("empty tool pattern")
	}
	if len(p) > maxGlobLen {
		return glob{}, fmt.Errorf("tool pattern longer than %d characters", maxGlobLen)
	}
	for i := 0; i < len(p); i++ {
		if !globChar(p[i]) {
			return glob{}, fmt.Errorf("tool pattern has %q at offset %d; allowed are A-Z a-z 0-9 _ . : / - and the wildcards * ?", p[i], i)
		}
	}
	switch {
	case strings.Trim(p, "*") == "":
		return glob{pattern: p, kind: globAll}, nil
	case !strings.ContainsAny(p, "*?"):
		return glob{pattern: p, kind: globExact}, nil
	}
	return glob{pattern: p, kind: globWild}, nil
}

func globChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '_', '.', ':', '/', '-', '*', '?':
		return true
	}
	return false
}

func (g glob) match(name string) bool {
	switch g.kind {
	case globAll:
		return true
	case globExact:
		return g.pattern == name
	}
	return wildMatch(g.pattern, name)
}

// wildMatch is the classic greedy matcher with single-star backtracking: O(len(p)·len(s)) in the
// worst case, no recursion, no allocation. p is ASCII (compileGlob); s may be any string, and
// `?` consumes one rune of it (an invalid byte counts as one rune).
func wildMatch(p, s string) bool {
	pi, si := 0, 0
	starP, starS := -1, 0
	for si < len(s) {
		if pi < len(p) {
			switch p[pi] {
			case '*':
				starP, starS = pi, si
				pi++
				continue
			case '?':
				_, n := utf8.DecodeRuneInString(s[si:])
				pi++
				si += n
				continue
			default:
				if p[pi] == s[si] {
					pi++
					si++
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		// Let the last star absorb one more rune and retry from just after it.
		_, n := utf8.DecodeRuneInString(s[starS:])
		starS += n
		pi, si = starP+1, starS
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}
