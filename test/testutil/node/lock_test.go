package node

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// TestLockMachineWaits: while one run holds the lock a second waits (here until its context
// ends), and once the first releases it the second takes it.
func TestLockMachineWaits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.lock")
	logf := func(string, ...any) {}
	first, err := lockMachine(t.Context(), path, logf)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer cancel()
	if second, err := lockMachine(ctx, path, logf); !errors.Is(err, context.DeadlineExceeded) {
		_ = second.Close()
		t.Fatalf("a second lock while the first is held: %v, want it to wait until its deadline", err)
	}
	got := make(chan error, 1)
	go func() {
		f, err := lockMachine(t.Context(), path, logf)
		if err == nil {
			_ = f.Close()
		}
		got <- err
	}()
	time.Sleep(200 * time.Millisecond)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting run did not get the lock once it was released")
	}
}
