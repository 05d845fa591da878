package main

import (
	"runtime"
	"testing"
)

// TestVersion: `actgate version` prints a line with the linked release ("dev" in a plain
// build; the image build links its tag), the Go version and the platform, then one with the
// review protocol level and the ranges each side accepts.
func TestVersion(t *testing.T) {
	code, out, errs := runCLI("version")
	want := "actgate dev " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n" +
		"review protocol level 2 (the sidecar needs an authority service of level 1 or newer; the authority service serves sidecars of levels 1 to 2)\n"
	if code != exitOK || out != want || errs != "" {
		t.Fatalf("version = %d %q %q, want 0 %q", code, out, errs, want)
	}
	if code, _, _ := runCLI("version", "extra"); code != exitUsage {
		t.Errorf("version with an argument exited %d, want %d", code, exitUsage)
	}
}
