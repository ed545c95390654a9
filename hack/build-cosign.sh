#!/usr/bin/env bash
# Builds cosign (the signer of a release's image and chart: hack/release.sh; tests/e2e/test_release.py
# verifies with it) from its published Go module (wrapper module hack/tools/cosign) into the cache:
#   ${LPO_CACHE_DIR:-$HOME/.cache/liqo-peering-operator}/tools/cosign-<version>/cosign
# Not part of `make tools`: only a signed release needs it, and it is the largest build of hack/.
# Idempotent: a no-op when the cached binary was built from the same inputs.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# shellcheck source=versions.env
source hack/versions.env
cache_dir=${LPO_CACHE_DIR:-$HOME/.cache/liqo-peering-operator}/tools

# shellcheck source=build-lib.sh
source hack/build-lib.sh  # require_version, build

require_version hack/tools/cosign github.com/sigstore/cosign/v2 "v$COSIGN_VERSION"
build hack/tools/cosign github.com/sigstore/cosign/v2/cmd/cosign "$cache_dir/cosign-$COSIGN_VERSION/cosign" \
    "-X sigs.k8s.io/release-utils/version.gitVersion=v$COSIGN_VERSION -X sigs.k8s.io/release-utils/version.gitTreeState=clean"
