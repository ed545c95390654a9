//go:build tools

// Package tools pins the commands this module builds, so that `go mod tidy` keeps their
// dependencies. Build with: go build k8s.io/kubernetes/cmd/kube-apiserver
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
