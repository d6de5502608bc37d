// Command etcd is upstream etcd, built from its published Go module so the
// test control plane needs nothing but the Go module proxy.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
