// Package testutil holds small helpers shared by actgate's test packages. Nothing outside
// tests imports it.
package testutil

import (
	"bytes"
	"sync"
)

// Buffer collects a process's or a command's output while it runs: a bytes.Buffer that is safe
// to read (String) while another goroutine writes it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
