// Command coredns is the cluster DNS of the local clusters with nodes (testenv/localk8s). Upstream's own
// main lives at the module's root, which cannot be built from another module with its plugins chosen, so
// this wrapper links only the plugins the harness's Corefile uses: a smaller and faster build.
package main

import (
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"

	"github.com/coredns/coredns/coremain"
)

func main() {
	coremain.Run()
}
