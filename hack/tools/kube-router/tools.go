//go:build tools

// Package tools pins the command this module builds, so that `go mod tidy` keeps its dependencies.
// Build with: go build github.com/cloudnativelabs/kube-router/v2/cmd/kube-router
package tools

import (
	_ "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router"
)
