package testutil

import (
	"testing"
	"time"
)

// Eventually polls cond every 100 ms until it returns nil; when d passes first, the test fails
// naming what it waited for and cond's last error.
func Eventually(t testing.TB, d time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %v", d, what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
