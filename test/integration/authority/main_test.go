package authority

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/actgate/actgate/test/envtest"
)

// shared is the one API server most tests of this package share (a start costs seconds on two
// cores). It starts on the first test that asks for it, so -short runs start none; TestMain
// stops it after the last test. Tests that stop an API server start their own.
var shared struct {
	once sync.Once
	env  *envtest.Env
	err  error
}

func TestMain(m *testing.M) {
	// controller-runtime's envtest logs through its package logger; without one it prints a
	// stack trace per start.
	ctrllog.SetLogger(logr.Discard())
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
func apiServer(t testing.TB) *envtest.Env {
	t.Helper()
	envtest.SkipIfShort(t)
	shared.once.Do(func() { shared.env, shared.err = envtest.New(context.Background()) })
	if shared.err != nil {
		t.Fatalf("envtest: %v", shared.err)
	}
	return shared.env
}
