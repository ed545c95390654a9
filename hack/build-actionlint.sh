#!/usr/bin/env bash
# Builds actionlint (the GitHub Actions workflow linter that hack/lint.sh runs) from its published Go
# module (wrapper module hack/tools/actionlint) into the cache:
#   ${LPO_CACHE_DIR:-$HOME/.cache/liqo-peering-operator}/tools/actionlint-<version>/actionlint
# Idempotent: a no-op when the cached binary was built from the same inputs.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# shellcheck source=versions.env
source hack/versions.env
cache_dir=${LPO_CACHE_DIR:-$HOME/.cache/liqo-peering-operator}/tools

# shellcheck source=build-lib.sh
source hack/build-lib.sh  # require_version, build

require_version hack/tools/actionlint github.com/rhysd/actionlint "v$ACTIONLINT_VERSION"
build hack/tools/actionlint github.com/rhysd/actionlint/cmd/actionlint \
    "$cache_dir/actionlint-$ACTIONLINT_VERSION/actionlint" \
    "-X github.com/rhysd/actionlint.version=v$ACTIONLINT_VERSION"
