//go:build tools

// Package tools pins kubectl, built from the same Kubernetes release as the local clusters (a module of
// its own so that adding it does not invalidate the cached kube-apiserver build).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kubectl"
)
