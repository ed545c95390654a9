#!/usr/bin/env bash
# Builds what the ClusterProfile end-to-end test (tests/e2e/test_clusterprofile.py) runs from the upstream
# ClusterProfile API module, sigs.k8s.io/cluster-inventory-api at CLUSTER_INVENTORY_API_VERSION (wrapper module
# hack/tools/secretreader): its secretreader access provider plugin, and a copy of its ClusterProfile CRD taken
# from the module's source in the Go module cache. Prints the directory that holds both:
#
#   ${LPO_CACHE_DIR:-$HOME/.cache/liqo-peering-operator}/tools/secretreader-<hash>/{secretreader-plugin,clusterprofiles.yaml}
#
# Idempotent: the directory is keyed by a hash of the wrapper's go.mod and go.sum, and published atomically,
# so a concurrent or interrupted build never leaves a half-written one.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
# shellcheck source=versions.env
source hack/versions.env
# shellcheck source=build-lib.sh
source hack/build-lib.sh  # require_version
module=sigs.k8s.io/cluster-inventory-api
src=hack/tools/secretreader
require_version "$src" "$module" "v$CLUSTER_INVENTORY_API_VERSION"
cache="${LPO_CACHE_DIR:-$HOME/.cache/liqo-peering-operator}/tools"
hash="$(cat "$src/go.mod" "$src/go.sum" | sha256sum | cut -c1-16)"
dir="$cache/secretreader-$hash"
if [[ -x $dir/secretreader-plugin && -s $dir/clusterprofiles.yaml ]]; then
  echo "$dir"
  exit 0
fi
mkdir -p "$cache"
tmp="$(mktemp -d "$cache/.secretreader-build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
(cd "$src" && CGO_ENABLED=0 GOGC=${GOGC:-400} go build -mod=readonly -trimpath -ldflags "-s -w" \
  -o "$tmp/secretreader-plugin" "$module/plugins/secretreader/cmd/plugin") >&2
# The CRD as the module publishes it (never committed here): its directory in the module cache.
moddir="$(cd "$src" && go mod download -json "$module@v$CLUSTER_INVENTORY_API_VERSION" |
  sed -n 's/^\s*"Dir": "\(.*\)",\?$/\1/p')"
crd="$moddir/config/crd/bases/multicluster.x-k8s.io_clusterprofiles.yaml"
[[ -s $crd ]] || { echo "build-secretreader: no ClusterProfile CRD at $crd" >&2; exit 1; }
cp "$crd" "$tmp/clusterprofiles.yaml"
chmod 0755 "$tmp"
if ! mv -T "$tmp" "$dir" 2>/dev/null; then
  [[ -x $dir/secretreader-plugin ]] || { echo "build-secretreader: could not publish $dir" >&2; exit 1; }
fi
trap - EXIT
echo "$dir"
