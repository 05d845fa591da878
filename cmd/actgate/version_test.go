package main

import (
	"runtime"
	"testing"
)

// TestVersion: `actgate version` prints one line with the linked release ("dev" in a plain
// build; the image build links its tag), the Go version and the platform.
func TestVersion(t *testing.T) {
	code, out, errs := runCLI("version")
	if want := "actgate dev " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"; code != exitOK || out != want || errs != "" {
		t.Fatalf("version = %d %q %q, want 0 %q", code, out, errs, want)
	}
	if code, _, _ := runCLI("version", "extra"); code != exitUsage {
		t.Errorf("version with an argument exited %d, want %d", code, exitUsage)
	}
}
