//go:build tools

// Package tools pins the command this module builds, so that `go mod tidy` keeps its dependencies.
// Build with: go build sigs.k8s.io/cluster-inventory-api/plugins/secretreader/cmd/plugin
package tools

import (
	_ "sigs.k8s.io/cluster-inventory-api/plugins/secretreader/cmd/plugin"
)
