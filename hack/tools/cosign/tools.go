//go:build tools

// Package tools pins the command this module builds, so that `go mod tidy` keeps its dependencies.
// Build with: go build github.com/sigstore/cosign/v2/cmd/cosign
package tools

import (
	_ "github.com/sigstore/cosign/v2/cmd/cosign"
)
