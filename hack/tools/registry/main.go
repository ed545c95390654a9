// Command registry is the OCI distribution registry of the harness (testenv/localk8s/registry.py).
// Upstream's main (cmd/registry) links every storage driver (S3, GCS, Azure) and auth scheme; this wrapper
// links only the filesystem driver the harness uses: a smaller and faster build.
package main

import (
	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
)

func main() {
	// RootCmd's commands exit non-zero themselves on failure.
	_ = registry.RootCmd.Execute()
}
