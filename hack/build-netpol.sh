#!/usr/bin/env bash
# Builds what enforces NetworkPolicies on the nodes tier's clusters (testenv/netpol.py): kube-router, whose
# network policy controller runs alone on a node (wrapper module hack/tools/kube-router), into the cache:
#   ${LPO_CACHE_DIR:-$HOME/.cache/liqo-peering-operator}/tools/kube-router-<version>/kube-router
# With the argument kube-network-policies, builds that instead (hack/tools/kube-network-policies), which
# needs a kernel with nftables' queue expression (docs/development/testing.md); no test runs it.
# Idempotent: a no-op when the cached binary was built from the same inputs.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# shellcheck source=versions.env
source hack/versions.env
cache_dir=${LPO_CACHE_DIR:-$HOME/.cache/liqo-peering-operator}/tools

# shellcheck source=build-lib.sh
source hack/build-lib.sh  # require_version, build

case ${1:-kube-router} in
    kube-router)
        require_version hack/tools/kube-router github.com/cloudnativelabs/kube-router/v2 "v$KUBE_ROUTER_VERSION"
        build hack/tools/kube-router github.com/cloudnativelabs/kube-router/v2/cmd/kube-router \
            "$cache_dir/kube-router-$KUBE_ROUTER_VERSION/kube-router" \
            "-X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=v$KUBE_ROUTER_VERSION"
        ;;
    kube-network-policies)
        require_version hack/tools/kube-network-policies sigs.k8s.io/kube-network-policies \
            "v$KUBE_NETWORK_POLICIES_VERSION"
        build hack/tools/kube-network-policies sigs.k8s.io/kube-network-policies/cmd \
            "$cache_dir/kube-network-policies-$KUBE_NETWORK_POLICIES_VERSION/kube-network-policies" ""
        ;;
    *)
        echo "usage: $0 [kube-router|kube-network-policies]" >&2
        exit 2
        ;;
esac
