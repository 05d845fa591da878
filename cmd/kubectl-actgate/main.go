// Command kubectl-actgate is the kubectl plugin `kubectl actgate`: kubectl runs it when it is on
// PATH and the first argument after `kubectl` is actgate. See internal/kubectlplugin.
//
//	kubectl actgate acts                 the act ledger
//	kubectl actgate moments              pending binding moments addressed to me
//	kubectl actgate show NAME            a binding moment's envelope and act
//	kubectl actgate resolve NAME --option N | --answer TEXT | --question | --decline
//	kubectl actgate pick [NAME]          the arrow-key picker
//	kubectl actgate console              the web console, on loopback
package main

import (
	"os"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/actgate/actgate/internal/kubectlplugin"
)

func main() {
	os.Exit(kubectlplugin.Main(os.Args[1:], kubectlplugin.Options{
		Streams: genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr},
		Now:     time.Now,
	}))
}
