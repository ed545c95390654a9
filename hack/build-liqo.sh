#!/usr/bin/env bash
# Builds Liqo's control-plane commands and liqoctl from the published Go module of LIQO_VERSION (the
# environment's, else hack/versions.env's), through its wrapper module hack/tools/liqo/v<version>/, into
#   ${LPO_CACHE_DIR:-$HOME/.cache/liqo-peering-operator}/tools/liqo-<version>/<binary>
# Used by the `realliqo` e2e tests (testenv/liqo_real). liqoctl is built only for the comparison
# benchmark and the adoption test: the operator never runs it. The other components of Liqo's images
# (proxy, metric-agent, fabric, gateway and its wireguard and geneve containers, telemetry,
# uninstaller) are built on request, by hack/build-liqo-images.sh; each is named as Liqo's
# build/liqo/build.sh names it (its cmd/ directory's basename: cmd/gateway/wireguard -> wireguard).
# wireguard-go (golang.zx2c4.com/wireguard, in the wrapper modules of the versions whose WireGuard gateway
# executes /usr/bin/wireguard-go: up to v1.1.x) is built on request too.
# Idempotent (only missing binaries are built) and one build at a time (`make test` runs another lane of
# builds beside it). Prints each build's time. Usage: hack/build-liqo.sh [binary...]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# shellcheck source=versions.env
source hack/versions.env
out_dir=${LPO_CACHE_DIR:-$HOME/.cache/liqo-peering-operator}/tools/liqo-$LIQO_VERSION
module=hack/tools/liqo/v$LIQO_VERSION
# The installed Go builds every version (their go directives are older): never download another.
export GOTOOLCHAIN=local

if [[ ! -f $module/go.mod ]]; then
    echo "error: no wrapper module $module for Liqo v$LIQO_VERSION (there are: $(ls hack/tools/liqo | xargs))" >&2
    exit 1
fi
# shellcheck source=build-lib.sh
source hack/build-lib.sh
require_version "$module" github.com/liqotech/liqo "v$LIQO_VERSION"

binaries=("$@")
if [[ ${#binaries[@]} -eq 0 ]]; then
    # Cheapest first, so that a partial run still yields something useful.
    binaries=(ipam crd-replicator liqo-controller-manager virtual-kubelet webhook liqoctl)
fi

liqo=github.com/liqotech/liqo/cmd
for bin in "${binaries[@]}"; do
    case $bin in
        liqo-controller-manager | crd-replicator | ipam | virtual-kubelet | webhook | liqoctl) pkg=$liqo/$bin ;;
        proxy | metric-agent | fabric | gateway | telemetry | uninstaller) pkg=$liqo/$bin ;;
        wireguard | geneve) pkg=$liqo/gateway/$bin ;;
        wireguard-go) pkg=golang.zx2c4.com/wireguard ;;
        *)
            echo "error: unknown Liqo binary '$bin'" >&2
            exit 2
            ;;
    esac
    out=$out_dir/$bin
    if [[ -x $out ]]; then
        echo "cached: $out"
        continue
    fi
    mkdir -p "$out_dir"
    ldflags="-s -w"
    # Same stamp as Liqo's build/liqoctl/build.sh.
    [[ $bin == liqoctl ]] && ldflags+=" -X github.com/liqotech/liqo/pkg/liqoctl/version.LiqoctlVersion=v$LIQO_VERSION"
    echo "building $pkg (Liqo v$LIQO_VERSION) -> $out"
    start=$SECONDS
    cpu=$(cpu_seconds)
    # Static binaries like Liqo's images; temp name + rename so an interrupted build is never cached.
    # GOGC=400: less of the compiler's time goes to garbage collection (hack/build-lib.sh).
    CGO_ENABLED=0 GOGC=${GOGC:-400} go -C "$root/$module" build -trimpath -ldflags "$ldflags" -o "$out.tmp" "$pkg"
    mv -f "$out.tmp" "$out"
    echo "built $bin in $((SECONDS - start))s, CPU $(($(cpu_seconds) - cpu))s ($(du -h "$out" | cut -f1))"
done
