//go:build tools

// Nothing to pin any more: both programs of this module (main.go, components/main.go) import what they
// build from, so `go mod tidy` keeps it.
package main
