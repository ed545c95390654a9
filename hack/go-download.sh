#!/usr/bin/env bash
# Downloads the Go modules that every build of hack/ needs (each wrapper module's packages and their
# dependencies, as `go list -deps` finds them), modules in the order the builds use them. hack/test.sh runs
# it in the background: downloads wait on the network and builds on the CPU, so on an empty module cache
# the two overlap; with a full one it takes seconds. A download that fails here is retried by the build.
set -uo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
start=$SECONDS
# shellcheck source=versions.env
source hack/versions.env
# shellcheck source=build-lib.sh
source hack/build-lib.sh  # build_tags
modules=(hack/tools/kubernetes hack/tools/kubectl hack/tools/kubernetes-floor hack/tools/etcd hack/tools/helm
    hack/tools/coredns hack/tools/prometheus hack/tools/registry hack/tools/oras hack/tools/cosign hack/tools/actionlint hack/kstatus-check "hack/tools/liqo/v$LIQO_VERSION")
for v in $LIQO_MATRIX; do modules+=("hack/tools/liqo/v$v"); done
modules+=(hack/tools/flux hack/tools/argocd hack/tools/kustomize)
# The list above only sets the order; every other wrapper module of hack/ comes after it.
while read -r dir; do
    [[ " ${modules[*]} " == *" $dir "* ]] || modules+=("$dir")
done < <(find hack -name go.mod -printf '%h
' | LC_ALL=C sort)
for dir in "${modules[@]}"; do
    [[ -f $dir/go.mod ]] || continue
    step=$SECONDS
    # The packages a wrapper module builds: its own, and the programs its tools.go names.
    mapfile -t pkgs < <(sed -n 's/^\s*_ "\(.*\)"$/\1/p' "$dir"/*.go)
    if compgen -G "$dir/*.go" | grep -qv '/tools\.go$'; then pkgs+=(./...); fi
    # With the module's build tags, as its build uses them: only the modules it links.
    if go -C "$dir" list -mod=readonly -tags "$(build_tags "$dir")" -deps "${pkgs[@]}" >/dev/null; then
        echo "modules of $dir: $((SECONDS - step))s"
    else
        echo "modules of $dir: failed (the build will download them)"
    fi
done
echo "modules ready in $((SECONDS - start))s"
