//go:build tools

// The commands this module builds, pinned so that `go mod tidy` keeps their dependencies.
package tools

import (
	_ "github.com/fluxcd/helm-controller"
	_ "github.com/fluxcd/kustomize-controller"
	_ "github.com/fluxcd/source-controller"
)
