//go:build tools

// Package tools pins the command this module builds, so that `go mod tidy` keeps its
// dependencies. Build with: go build github.com/prometheus/prometheus/cmd/promtool
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
