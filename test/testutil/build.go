package testutil

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/actgate/actgate/test/envtest"
)

// BuildActgate builds cmd/actgate from this tree with the given build tags ("" for the shipped
// binary) into the test's temporary directory, with the caller's Go environment, and returns
// its path.
func BuildActgate(t testing.TB, tags string) string {
	t.Helper()
	root, err := envtest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "actgate")
	cmd := exec.Command("go", "build", "-tags", tags, "-o", bin, "./cmd/actgate")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags %q ./cmd/actgate: %v\n%s", tags, err, out)
	}
	return bin
}
