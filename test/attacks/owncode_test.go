package attacks

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/actgate/actgate/test/envtest"
)

// notOurs are the tracked paths that hold text the project did not write, each with why it is
// here. Everything else is the project's own: a server or fixture another project wrote is run
// from its registry package (test/interop/package-lock.json, go.mod), never carried as a file.
var notOurs = map[string]string{
	// Conformance vectors, copied from the specifications' public conformance material with
	// their attribution, expected values unedited.
	"internal/aeb/testdata/": "conformance vectors with attribution",
}

// foreignMarks are what a file another project wrote carries: a licence file of its own, a
// licence identifier or copyright line, or a source-file header naming its origin.
var foreignMarks = regexp.MustCompile(`(?i)(SPDX-License-Identifier|^\s*(//|#|\*|/\*)?\s*copyright\s+(\(c\)|©|\d{4})|Licensed under the Apache License|Permission is hereby granted, free of charge)`)

// ownTypeScript is the folder of the project's own TypeScript: the host-loop SDK's npm package
// (docs/api.md "Host loops (/v1/enforce, /v1/complete)"); its files get the header check too.
const ownTypeScript = "sdk/typescript/"

// TestOnlyProjectCode: the repository holds only code the project wrote. No tracked file outside
// notOurs is a licence file, carries another project's licence or copyright header, or is
// TypeScript source outside ownTypeScript (the interop suite's servers are the project's own
// .mjs files, and the official ones run from node_modules).
func TestOnlyProjectCode(t *testing.T) {
	root, err := envtest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	files := strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
	if len(files) < 100 {
		t.Fatalf("git ls-files listed %d files; the repository has more", len(files))
	}
	for _, f := range files {
		if excused(f) || f == "test/attacks/owncode_test.go" { // this file spells the marks out
			continue
		}
		base := strings.ToUpper(filepath.Base(f))
		switch {
		case strings.HasPrefix(base, "LICENSE") || strings.HasPrefix(base, "COPYING") || base == "NOTICE":
			t.Errorf("%s: a licence file of another project's code; run that code from its registry package, or write the project's own", f)
			continue
		// The project's own TypeScript is the host-loop SDK's package (sdk/typescript, an npm
		// package written in TypeScript); any other .ts file is someone else's.
		case (strings.HasSuffix(f, ".ts") || strings.HasSuffix(f, ".tsx")) && !strings.HasPrefix(f, ownTypeScript):
			t.Errorf("%s: TypeScript source the project did not write (its own Node programs are .mjs)", f)
			continue
		}
		if line, ok := foreignHeader(filepath.Join(root, f)); ok {
			t.Errorf("%s: carries another project's header (%q); the repository holds only code the project wrote", f, line)
		}
	}
}

func excused(path string) bool {
	for prefix := range notOurs {
		if strings.HasPrefix(path, prefix) {
			return true
		}
	}
	return false
}

// foreignHeader reports the first line of the file's first 40 that marks another project's
// code. Binary files (a NUL byte in the first 8 KiB) are skipped.
func foreignHeader(path string) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer func() { _ = f.Close() }()
	head := make([]byte, 8192)
	n, _ := f.Read(head)
	head = head[:n]
	if bytes.IndexByte(head, 0) >= 0 {
		return "", false
	}
	sc := bufio.NewScanner(bytes.NewReader(head))
	for i := 0; i < 40 && sc.Scan(); i++ {
		if foreignMarks.MatchString(sc.Text()) {
			return strings.TrimSpace(sc.Text()), true
		}
	}
	return "", false
}
