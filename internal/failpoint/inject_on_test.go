//go:build failpoints && unix

package failpoint

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// childEnv makes the test binary, re-run, call Inject(ChildPoint) and exit 0 if it returns.
const childEnv = "ACTGATE_FAILPOINT_TEST_CHILD"

func TestMain(m *testing.M) {
	if p := os.Getenv(childEnv); p != "" {
		if err := Inject(Point(p)); err != nil {
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// child runs Inject(p) in a fresh process with ACTGATE_FAILPOINT=spec.
func child(t *testing.T, p Point, spec string) error {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(p), EnvVar+"="+spec)
	return cmd.Run()
}

func TestInjectKills(t *testing.T) {
	for _, spec := range []string{"after-pending", "after-pending=kill", "after-pending=bogus"} {
		t.Run(spec, func(t *testing.T) {
			var ee *exec.ExitError
			err := child(t, AfterPending, spec)
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("want death by SIGKILL, got %v", err)
			}
		})
	}
}

func TestInjectOtherPointRuns(t *testing.T) {
	if err := child(t, AfterInvoke, "after-pending"); err != nil {
		t.Fatalf("a point not selected must run on: %v", err)
	}
}

func TestInjectSleepAndError(t *testing.T) {
	if !Enabled() {
		t.Fatal("not Enabled in a failpoints build")
	}
	t.Setenv(EnvVar, "during-invoke=sleep:150ms")
	start := time.Now()
	if err := Inject(DuringInvoke); err != nil || time.Since(start) < 150*time.Millisecond {
		t.Fatalf("sleep: %v after %v", err, time.Since(start))
	}
	t.Setenv(EnvVar, "during-invoke=error")
	if err := Inject(DuringInvoke); !errors.Is(err, ErrInjected) {
		t.Fatalf("error action: %v", err)
	}
	if err := Inject(AfterInvoke); err != nil {
		t.Fatalf("unselected point: %v", err)
	}
}
