// Command nodectl brings the one-node test cluster of test/testutil/node up or down for a
// person at a shell (hack/node.sh runs it):
//
//	nodectl up DIR        # node up under DIR, left running; prints the admin kubeconfig
//	nodectl down DIR      # tear it down, machine as before (DIR keeps the logs)
//	nodectl snapshot FILE # write the machine's state (links, routes, netfilter, mounts, …)
//	nodectl diff FILE     # compare the machine now with a snapshot FILE; exit 1 if it differs
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/actgate/actgate/test/testutil/node"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: nodectl up|down DIR | snapshot|diff FILE")
		os.Exit(2)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	arg := os.Args[2]
	switch os.Args[1] {
	case "up":
		n, err := node.Up(ctx, node.Options{Dir: arg, Detach: true})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf("export KUBECONFIG=%s CONTAINER_RUNTIME_ENDPOINT=unix://%s CONTAINERD_ADDRESS=%s PATH=%s:%s:$PATH\n",
			n.Kubeconfig, n.ContainerdSocket, n.ContainerdSocket, n.ControlPlaneBinDir, n.NodeBinDir)
	case "down":
		if err := node.DownDir(arg, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	case "snapshot":
		b, err := json.MarshalIndent(node.TakeSnapshot(), "", "  ")
		if err == nil {
			err = os.WriteFile(arg, b, 0o600)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	case "diff":
		var before node.Snapshot
		b, err := os.ReadFile(arg)
		if err == nil {
			err = json.Unmarshal(b, &before)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if d := node.TakeSnapshot().Diff(before); len(d) > 0 {
			for _, l := range d {
				fmt.Println(l)
			}
			os.Exit(1)
		}
	default:
		fmt.Fprintln(os.Stderr, "usage: nodectl up|down DIR | snapshot|diff FILE")
		os.Exit(2)
	}
}
