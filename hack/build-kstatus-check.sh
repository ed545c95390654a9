#!/usr/bin/env bash
# Builds hack/kstatus-check (kstatus verdicts for LiqoPeerings, see its main.go) into the tool cache
# and prints the binary's path. Idempotent: the cache directory is keyed by a hash of go.sum, go.mod
# and the sources, so a second run with nothing changed only prints the path.
#
#   ${LPO_CACHE_DIR:-$HOME/.cache/liqo-peering-operator}/tools/kstatus-check-<hash>/kstatus-check
set -euo pipefail
src="$(cd "$(dirname "$0")/kstatus-check" && pwd)"
cache="${LPO_CACHE_DIR:-$HOME/.cache/liqo-peering-operator}/tools"
hash="$(cd "$src" && cat go.sum go.mod ./*.go | sha256sum | cut -c1-16)"
dir="$cache/kstatus-check-$hash"
bin="$dir/kstatus-check"
if [[ -x $bin ]]; then
  echo "$bin"
  exit 0
fi
mkdir -p "$cache"
tmp="$(mktemp -d "$cache/.kstatus-check-build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
(cd "$src" && CGO_ENABLED=0 GOGC=${GOGC:-400} go build -mod=readonly -trimpath -o "$tmp/kstatus-check" .) >&2
# Publish atomically, so a concurrent build or an interrupted one never leaves a half-written binary.
if ! mv -T "$tmp" "$dir" 2>/dev/null; then
  [[ -x $bin ]] || { echo "build-kstatus-check: could not publish $dir" >&2; exit 1; }
fi
trap - EXIT
echo "$bin"
