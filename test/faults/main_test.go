//go:build unix

package faults

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// actgateBin is the actgate binary built once for the package with -tags failpoints.
var actgateBin string

// controlPlaneBin is cmd/actgate-controlplane, built beside it with the same tags.
var controlPlaneBin string

// TestMain builds cmd/actgate with the failpoints tag once (the build is most of the cost on a
// loaded machine), and afterwards removes it and stops the control plane if a test started it.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// controller-runtime's envtest logs through its package logger; without one it prints a
	// stack trace per start.
	ctrllog.SetLogger(logr.Discard())
	dir, err := os.MkdirTemp("", "actgate-faults-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	actgateBin = filepath.Join(dir, "actgate")
	controlPlaneBin = filepath.Join(dir, "actgate-controlplane")
	cmd := exec.Command("go", "build", "-tags", "failpoints", "-o", dir+string(os.PathSeparator), "./cmd/actgate", "./cmd/actgate-controlplane")
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build -tags failpoints ./cmd/actgate ./cmd/actgate-controlplane: %v\n%s", err, out)
		return 1
	}
	code := m.Run()
	if sharedEnv.env != nil {
		if err := sharedEnv.env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}
