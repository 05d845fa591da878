//go:build unix

package faults

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// actgateBin is the actgate binary built once for the package with -tags failpoints.
var actgateBin string

// TestMain builds cmd/actgate with the failpoints tag once (the build is most of the cost on a
// loaded machine) and removes it afterwards.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "actgate-faults-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	actgateBin = filepath.Join(dir, "actgate")
	cmd := exec.Command("go", "build", "-tags", "failpoints", "-o", actgateBin, "./cmd/actgate")
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build -tags failpoints ./cmd/actgate: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}
