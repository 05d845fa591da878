package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// lockFile is the machine-wide lock of node runs: the node's bridge, addresses, iptables
// chains and cgroup root are the machine's, so one node at a time may exist. Up takes it
// (waiting while another run holds it) and Down releases it; a process that dies releases it
// with its files. A detached node (hack/node.sh up) holds it only while nodectl runs; a later
// Up then finds the node alive and refuses (reclaim) rather than waiting.
const lockFile = "/run/actgate-node.lock"

// lockMachine takes the lock file path exclusively, polling until ctx ends.
func lockMachine(ctx context.Context, path string, logf func(string, ...any)) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("node: lock: %w", err)
	}
	waited := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("node: lock %s: %w", path, err)
		}
		if !waited {
			logf("another node run holds %s: waiting for it to finish", path)
			waited = true
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("node: waiting for %s: %w", path, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}
