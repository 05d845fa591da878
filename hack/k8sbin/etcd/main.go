// Command etcd is etcd's own main, built here because `go install` of the etcd
// server module is refused (its go.mod has replace lines).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
