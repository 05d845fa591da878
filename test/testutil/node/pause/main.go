// Command pause is the node's pod sandbox process: it holds the pod's namespaces open, reaps
// the zombies re-parented to it (it is PID 1 of the pod when the pod shares a PID namespace)
// and exits on SIGINT or SIGTERM. test/testutil/node builds it statically into the sandbox
// image, since the machine has no registry to pull one from.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
