#!/usr/bin/env bash
# Builds Liqo's control-plane commands and liqoctl from the published Go module pinned in
# hack/versions.env (LIQO_VERSION), through the wrapper module hack/tools/liqo/, into
#   ${LPO_CACHE_DIR:-$HOME/.cache/liqo-peering-operator}/tools/liqo-<version>/<binary>
# Used by the `realliqo` e2e tests (testenv/liqo_real). liqoctl is built only for the comparison
# benchmark and the adoption test: the operator never runs it. The other components of Liqo's images
# (proxy, metric-agent, fabric, gateway and its wireguard and geneve containers, telemetry,
# uninstaller) are built on request, by hack/build-liqo-images.sh; each is named as Liqo's
# build/liqo/build.sh names it (its cmd/ directory's basename: cmd/gateway/wireguard -> wireguard).
# Idempotent (only missing binaries are built) and one build at a time: each `go build` already
# uses every core. Prints each build's time. Usage: hack/build-liqo.sh [binary...]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# shellcheck source=versions.env
source hack/versions.env
out_dir=${LPO_CACHE_DIR:-$HOME/.cache/liqo-peering-operator}/tools/liqo-$LIQO_VERSION

got=$(awk '$1 == "require" && $2 == "github.com/liqotech/liqo" {print $3; exit}' hack/tools/liqo/go.mod)
if [[ $got != "v$LIQO_VERSION" ]]; then
    echo "error: hack/tools/liqo/go.mod requires github.com/liqotech/liqo $got but hack/versions.env says v$LIQO_VERSION" >&2
    exit 1
fi

binaries=("$@")
if [[ ${#binaries[@]} -eq 0 ]]; then
    # Cheapest first, so that a partial run still yields something useful.
    binaries=(ipam crd-replicator liqo-controller-manager virtual-kubelet webhook liqoctl)
fi

for bin in "${binaries[@]}"; do
    case $bin in
        liqo-controller-manager | crd-replicator | ipam | virtual-kubelet | webhook | liqoctl) pkg=$bin ;;
        proxy | metric-agent | fabric | gateway | telemetry | uninstaller) pkg=$bin ;;
        wireguard | geneve) pkg=gateway/$bin ;;
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
    echo "building github.com/liqotech/liqo/cmd/$pkg -> $out"
    start=$SECONDS
    # Static binaries like Liqo's images; temp name + rename so an interrupted build is never cached.
    CGO_ENABLED=0 go -C "$root/hack/tools/liqo" build -trimpath -ldflags "$ldflags" -o "$out.tmp" \
        "github.com/liqotech/liqo/cmd/$pkg"
    mv -f "$out.tmp" "$out"
    echo "built $bin in $((SECONDS - start))s ($(du -h "$out" | cut -f1))"
done
