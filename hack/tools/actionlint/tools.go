//go:build tools

// Package tools pins the command this module builds, so that `go mod tidy` keeps its dependencies.
// Build with: go build github.com/rhysd/actionlint/cmd/actionlint
package tools

import (
	_ "github.com/rhysd/actionlint/cmd/actionlint"
)
