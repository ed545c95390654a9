#!/usr/bin/env bash
# Builds the GitOps controllers the GitOps e2e tests run as processes, from their published Go modules
# through wrapper modules in hack/tools/, into
#   ${LPO_CACHE_DIR:-$HOME/.cache/liqo-peering-operator}/tools/<tool>-<version>/<binary>
#   source-controller, kustomize-controller  Flux (tests/e2e/test_flux.py)
#   helm-controller                          Flux's HelmRelease (tests/e2e/test_flux_helmrelease.py)
#   argocd                                   Argo CD's application controller and repo server, called
#                                            by those names (tests/e2e/test_argocd.py)
#   kustomize                                what Argo CD's repo server runs for a kustomization.yaml
#   argocd-lua-health                        deploy/argocd/health.lua through Argo CD's own Lua VM
#                                            (hack/tools/argocd/main.go)
# Idempotent (a binary is rebuilt only when its version or inputs change) and one build at a time (`make
# test` runs another lane of builds beside it). Prints each build's time. Usage: hack/build-gitops.sh [binary...]
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
    binaries=(source-controller kustomize-controller helm-controller argocd argocd-lua-health kustomize)
fi

for bin in "${binaries[@]}"; do
    case $bin in
        source-controller)
            require_version hack/tools/flux github.com/fluxcd/source-controller \
                "v$FLUX_SOURCE_CONTROLLER_VERSION"
            build hack/tools/flux github.com/fluxcd/source-controller \
                "$cache_dir/source-controller-$FLUX_SOURCE_CONTROLLER_VERSION/source-controller" ""
            ;;
        kustomize-controller)
            require_version hack/tools/flux github.com/fluxcd/kustomize-controller \
                "v$FLUX_KUSTOMIZE_CONTROLLER_VERSION"
            build hack/tools/flux github.com/fluxcd/kustomize-controller \
                "$cache_dir/kustomize-controller-$FLUX_KUSTOMIZE_CONTROLLER_VERSION/kustomize-controller" ""
            ;;
        helm-controller)
            require_version hack/tools/flux github.com/fluxcd/helm-controller \
                "v$FLUX_HELM_CONTROLLER_VERSION"
            build hack/tools/flux github.com/fluxcd/helm-controller \
                "$cache_dir/helm-controller-$FLUX_HELM_CONTROLLER_VERSION/helm-controller" ""
            ;;
        argocd)
            require_version hack/tools/argocd github.com/argoproj/argo-cd/v3 "v$ARGOCD_VERSION"
            # The version `argocd version` and the components report (upstream's Makefile: LDFLAGS).
            # Argo CD's application controller and repo server, without the rest of its multi-call binary
            # (hack/tools/argocd/components/main.go says what is left out: the cold build is a quarter shorter).
            build hack/tools/argocd ./components "$cache_dir/argocd-$ARGOCD_VERSION/argocd" \
                "-X github.com/argoproj/argo-cd/v3/common.version=$ARGOCD_VERSION -X github.com/argoproj/argo-cd/v3/common.gitTreeState=clean" \
                hack/tools/argocd/components/main.go
            ;;
        argocd-lua-health)
            require_version hack/tools/argocd github.com/argoproj/argo-cd/v3 "v$ARGOCD_VERSION"
            build hack/tools/argocd . "$cache_dir/argocd-$ARGOCD_VERSION/argocd-lua-health" "" hack/tools/argocd/main.go
            ;;
        kustomize)
            require_version hack/tools/kustomize sigs.k8s.io/kustomize/kustomize/v5 "v$KUSTOMIZE_VERSION"
            build hack/tools/kustomize sigs.k8s.io/kustomize/kustomize/v5 "$cache_dir/kustomize-$KUSTOMIZE_VERSION/kustomize" \
                "-X sigs.k8s.io/kustomize/api/provenance.version=kustomize/v$KUSTOMIZE_VERSION"
            ;;
        *)
            echo "error: unknown binary '$bin'" >&2
            exit 2
            ;;
    esac
done
echo "gitops tools ready in $((SECONDS - script_start))s"
