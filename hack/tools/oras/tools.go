//go:build tools

// Package tools pins the command this module builds, so that `go mod tidy` keeps its dependencies.
// Build with: go build oras.land/oras/cmd/oras
package tools

import (
	_ "oras.land/oras/cmd/oras"
)
