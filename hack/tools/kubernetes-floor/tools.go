//go:build tools

// Package tools pins the commands this module builds, so that `go mod tidy` keeps their
// dependencies. Only the control plane: the floor tests run no nodes.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
