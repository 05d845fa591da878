package v1alpha1_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/actgate/actgate/test/envtest"
)

// shared is the one API server the tests of this package share (a start costs seconds on two
// cores). It starts on the first test that asks for it, so `go test -run TestSample` or -short
// runs start none, and TestMain stops it after the last test.
var shared struct {
	once sync.Once
	env  *envtest.Env
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.env != nil {
		if err := shared.env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

// apiServer returns the shared control plane, skipping t under -short.
func apiServer(t *testing.T) *envtest.Env {
	t.Helper()
	envtest.SkipIfShort(t)
	shared.once.Do(func() { shared.env, shared.err = envtest.New(context.Background()) })
	if shared.err != nil {
		t.Fatalf("envtest: %v", shared.err)
	}
	return shared.env
}
