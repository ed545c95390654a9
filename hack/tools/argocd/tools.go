//go:build tools

// The command this module builds besides argocd-lua-health (main.go), pinned so that `go mod tidy` keeps
// its dependencies. Build with: go build github.com/argoproj/argo-cd/v3/cmd
package main

import (
	_ "github.com/argoproj/argo-cd/v3/cmd"
)
