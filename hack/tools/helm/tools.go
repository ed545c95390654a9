//go:build tools

// Package tools pins the command this module builds, so that `go mod tidy` keeps its
// dependencies. Build with: go build helm.sh/helm/v3/cmd/helm
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
