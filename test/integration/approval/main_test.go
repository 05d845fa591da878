package approval_test

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}
