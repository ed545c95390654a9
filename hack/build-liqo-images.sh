#!/usr/bin/env bash
# Liqo's images, built here from the Liqo Go module of LIQO_VERSION (the environment's, else
# hack/versions.env's; no registry is reachable): one per image Liqo's Helm chart references (deployments/liqo in the module), laid out as
# Liqo's build/liqo/Dockerfile lays them out: the component's static binary at /usr/bin/<component>,
# /usr/bin/liqo-component linked to it as the entrypoint, /workspace the working directory. Their bases
# are made here from Debian's packages (hack/images/liqo-base.sh): `net` (Liqo's Dockerfile adds
# iproute2, nftables, wireguard-tools... for the gateway, wireguard and geneve images), `openssl` (the
# cert-creator image: the metric agent's init container runs /usr/bin/openssl), `static` (the others).
#
# The binaries come from hack/build-liqo.sh. Images are cached as docker-archives under
#   ${LPO_CACHE_DIR:-$HOME/.cache/liqo-peering-operator}/images/liqo-<component>-v<version>-<hash>.tar
# keyed by the Liqo version, the recipe (this file, the base's recipe) and the binaries' hash; their refs
# are localhost/liqotech/<image>:v<version>-<hash>. .local/liqo-images-<version>.json lists them for this
# checkout (testenv.liqo_chart reads it). Up to v1.1.x Liqo's WireGuard gateway executes
# /usr/bin/wireguard-go (v1.2.0 embeds it): the gateway/wireguard image of the versions whose wrapper
# module pins golang.zx2c4.com/wireguard has that binary too, as Liqo's build/liqo/Dockerfile builds it.
# Nothing of Liqo is copied into the repository.
# A warm run (nothing changed) takes seconds. Usage: [LIQO_VERSION=<v>] hack/build-liqo-images.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
start=$SECONDS
python=${PYTHON:-$root/.venv/bin/python}

# shellcheck source=versions.env
source hack/versions.env
cache=${LPO_CACHE_DIR:-$HOME/.cache/liqo-peering-operator}
images=$cache/images
bin_dir=$cache/tools/liqo-$LIQO_VERSION
manifest=.local/liqo-images-$LIQO_VERSION.json
mkdir -p "$images" .local
# The binaries an image holds besides its component's, by component.
declare -A extra_binaries=()
if grep -q '"golang.zx2c4.com/wireguard"' "hack/tools/liqo/v$LIQO_VERSION/tools.go" 2>/dev/null; then
    extra_binaries[wireguard]=wireguard-go
fi

# component  image (its name under ghcr.io/liqotech/ in the chart's values)  base
components=(
    "liqo-controller-manager liqo-controller-manager static"
    "crd-replicator crd-replicator static"
    "ipam ipam static"
    "webhook webhook static"
    "proxy proxy static"
    "virtual-kubelet virtual-kubelet static"
    "metric-agent metric-agent static"
    "telemetry telemetry static"
    "uninstaller uninstaller static"
    "fabric fabric static"
    "gateway gateway net"
    "wireguard gateway/wireguard net"
    "geneve gateway/geneve net"
)

# The binaries (each build is skipped when cached).
step=$SECONDS
binaries=()
for c in "${components[@]}"; do
    read -r component _ _ <<<"$c"
    for bin in "$component" ${extra_binaries[$component]:-}; do
        [[ -x $bin_dir/$bin ]] || binaries+=("$bin")
    done
done
if [[ ${#binaries[@]} -gt 0 ]]; then
    hack/build-liqo.sh "${binaries[@]}"
    echo "binaries built in $((SECONDS - step))s"
fi

hash_of() { cat "$@" | sha256sum | cut -c1-16; }
recipe_key=$(hash_of hack/build-liqo-images.sh hack/images/liqo-base.sh <(echo "$LIQO_VERSION"))

# The bases, keyed by their recipe and kind.
declare -A base_archive
for kind in static net openssl; do
    key=$(hash_of hack/images/liqo-base.sh <(echo "$kind"))
    out=$images/.liqo-base-$kind-$key.rootfs.tar
    base_archive[$kind]=$out
    [[ -f $out ]] && continue
    echo "building the $kind base from Debian's packages (mmdebstrap)"
    step=$SECONDS
    hack/images/liqo-base.sh "$kind" "$out.tmp"
    mv -f "$out.tmp" "$out"
    echo "built the $kind base in $((SECONDS - step))s ($(du -h "$out" | cut -f1))"
done

# One image: the base's root filesystem as its lower layer (shared by the images on that base), and as its
# upper one the component's binary at /usr/bin/<component> with /usr/bin/liqo-component linked to it (none
# for cert-creator), and its extra binaries at /usr/bin/<binary>. Staged and packed only when not cached.
make_image() {
    local name=$1 base=$2 component=$3 config=$4 key=$5
    shift 5
    local ref=localhost/liqotech/$name:v$LIQO_VERSION-$key
    local out=$images/liqo-${name//\//-}-v$LIQO_VERSION-$key.tar
    if [[ ! -f $out ]]; then
        local step=$SECONDS extra=$work/$key layer=$work/$key.layer.tar bin
        mkdir -p "$extra"
        if [[ -n $component ]]; then
            mkdir -p "$extra/usr/bin"
            install -m 0755 "$bin_dir/$component" "$extra/usr/bin/$component"
            ln -s "$component" "$extra/usr/bin/liqo-component"
        fi
        for bin in "$@"; do
            install -m 0755 "$bin_dir/$bin" "$extra/usr/bin/$bin"
        done
        # Files only (their directories are in the base or made by the runtime), owned by root.
        (cd "$extra" && find . ! -type d | LC_ALL=C sort) >"$layer.list"
        tar --create --file "$layer" --directory "$extra" --owner=0 --group=0 --numeric-owner --mtime=@0 \
            --no-recursion --files-from "$layer.list"
        PYTHONPATH=$root "$python" -m testenv.localk8s archive "$layer" "$ref" "$out" "$config" --base "$base"
        rm -rf "$extra" "$layer" "$layer.list"
        echo "built $ref in $((SECONDS - step))s ($(du -h "$out" | cut -f1))"
    fi
    entries+=("\"$name\": {\"ref\": \"$ref\", \"archive\": \"$out\"}")
    archives+=("$out")
}

entries=()
archives=()
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
env_path='"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]'
for c in "${components[@]}"; do
    read -r component name base <<<"$c"
    read -ra extra <<<"${extra_binaries[$component]:-}"
    key=$(hash_of <(echo "$recipe_key $component $name $base ${extra[*]}") "$bin_dir/$component" \
        "${extra[@]/#/$bin_dir/}")
    make_image "$name" "${base_archive[$base]}" "$component" \
        "{\"Entrypoint\": [\"/usr/bin/liqo-component\"], \"WorkingDir\": \"/workspace\", $env_path}" "$key" \
        "${extra[@]}"
done
# cert-creator: build/cert-creator/Dockerfile, openssl as its entrypoint.
make_image cert-creator "${base_archive[openssl]}" "" "{\"Entrypoint\": [\"openssl\"], $env_path}" \
    "$(hash_of <(echo "$recipe_key cert-creator"))"

# Each change makes new archives: keep the three newest of each image of this version and of each base
# (other checkouts may use theirs), drop the rest.
for c in "${components[@]}" "cert-creator cert-creator"; do
    read -r _ name _ <<<"$c"
    ls -t "$images/liqo-${name//\//-}-v$LIQO_VERSION"-????????????????.tar | tail -n +4 | xargs -r rm -f
done
for kind in static net openssl; do
    ls -t "$images/.liqo-base-$kind"-????????????????.rootfs.tar | tail -n +4 | xargs -r rm -f
done

{
    echo "{"
    for i in "${!entries[@]}"; do
        sep=,
        [[ $i -eq $((${#entries[@]} - 1)) ]] && sep=
        echo "  ${entries[$i]}$sep"
    done
    echo "}"
} >"$manifest.tmp"
mv -f "$manifest.tmp" "$manifest"
echo "Liqo v$LIQO_VERSION's images ready in $((SECONDS - start))s: $(du -ch "${archives[@]}" | tail -1 | cut -f1) in $images ($manifest)"
