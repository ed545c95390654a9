// Command etcd is the upstream etcd server; this wrapper exists only so that it can be built
// with `go build` from the published module (upstream's own main lives in a module of its own).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
