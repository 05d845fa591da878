package v1alpha1_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/actgate/actgate/test/envtest"
)

// env is the one API server the tests of this package share (a start costs seconds on two
// cores); nil under -short, where only the tests that need no server run.
var env *envtest.Env

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	var err error
	if env, err = envtest.New(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// apiServer returns the shared control plane, skipping t under -short.
func apiServer(t *testing.T) *envtest.Env {
	t.Helper()
	envtest.SkipIfShort(t)
	return env
}
