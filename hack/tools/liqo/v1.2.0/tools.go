//go:build tools

// Package tools pins the Liqo commands this module builds, so that `go mod tidy` keeps their
// dependencies. Build with: go build github.com/liqotech/liqo/cmd/liqo-controller-manager
package tools

import (
	_ "github.com/liqotech/liqo/cmd/crd-replicator"
	_ "github.com/liqotech/liqo/cmd/fabric"
	_ "github.com/liqotech/liqo/cmd/gateway"
	_ "github.com/liqotech/liqo/cmd/gateway/geneve"
	_ "github.com/liqotech/liqo/cmd/gateway/wireguard"
	_ "github.com/liqotech/liqo/cmd/ipam"
	_ "github.com/liqotech/liqo/cmd/liqo-controller-manager"
	_ "github.com/liqotech/liqo/cmd/liqoctl"
	_ "github.com/liqotech/liqo/cmd/metric-agent"
	_ "github.com/liqotech/liqo/cmd/proxy"
	_ "github.com/liqotech/liqo/cmd/telemetry"
	_ "github.com/liqotech/liqo/cmd/uninstaller"
	_ "github.com/liqotech/liqo/cmd/virtual-kubelet"
	_ "github.com/liqotech/liqo/cmd/webhook"
)
