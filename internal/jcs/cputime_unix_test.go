//go:build unix

package jcs

import (
	"syscall"
	"time"
)

// processCPU is the user+system CPU time of the whole process (GC workers
// included). Benchmarks report it per op beside ns/op because on a shared
// machine wall time also counts the time spent waiting for a core.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
