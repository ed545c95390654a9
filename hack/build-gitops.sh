#!/usr/bin/env bash
# Builds the GitOps controllers the GitOps e2e tests run as processes, from their published Go modules
# through wrapper modules in hack/tools/, into
#   ${LPO_CACHE_DIR:-$HOME/.cache/liqo-peering-operator}/tools/<tool>-<version>/<binary>
#   source-controller, kustomize-controller  Flux (tests/e2e/test_flux.py)
# Idempotent (a binary is rebuilt only when its version or inputs change) and one build at a time: each
# `go build` already uses every core. Prints each build's time. Usage: hack/build-gitops.sh [binary...]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
script_start=$SECONDS

# shellcheck source=versions.env
source hack/versions.env
# shellcheck source=build-lib.sh
source hack/build-lib.sh  # require_version, build
cache_dir=${LPO_CACHE_DIR:-$HOME/.cache/liqo-peering-operator}/tools

binaries=("$@")
if [[ ${#binaries[@]} -eq 0 ]]; then
    binaries=(source-controller kustomize-controller)
fi

for bin in "${binaries[@]}"; do
    case $bin in
        source-controller)
            require_version hack/tools/source-controller github.com/fluxcd/source-controller \
                "v$FLUX_SOURCE_CONTROLLER_VERSION"
            build hack/tools/source-controller github.com/fluxcd/source-controller \
                "$cache_dir/source-controller-$FLUX_SOURCE_CONTROLLER_VERSION/source-controller" ""
            ;;
        kustomize-controller)
            require_version hack/tools/kustomize-controller github.com/fluxcd/kustomize-controller \
                "v$FLUX_KUSTOMIZE_CONTROLLER_VERSION"
            build hack/tools/kustomize-controller github.com/fluxcd/kustomize-controller \
                "$cache_dir/kustomize-controller-$FLUX_KUSTOMIZE_CONTROLLER_VERSION/kustomize-controller" ""
            ;;
        *)
            echo "error: unknown binary '$bin'" >&2
            exit 2
            ;;
    esac
done
echo "gitops tools ready in $((SECONDS - script_start))s"
