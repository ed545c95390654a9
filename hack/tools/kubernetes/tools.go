//go:build tools

// Package tools pins the commands this module builds, so that `go mod tidy` keeps their
// dependencies. Build with: go build k8s.io/kubernetes/cmd/kube-apiserver (and the others below)
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
