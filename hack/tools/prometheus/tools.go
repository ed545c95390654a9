//go:build tools

// Package tools pins the Prometheus server. Built with the tags in build-tags: of the service discoveries
// only Kubernetes' is linked (Prometheus's plugins/ package selects them by build tag), which spares the
// build the cloud providers' SDKs.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
)
