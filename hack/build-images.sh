#!/usr/bin/env bash
# `make images`: the operator image, built here from the project's Dockerfile (unchanged), and the base
# image it starts from, assembled from Debian's packages (hack/images/python-base.sh) and tagged with the
# name in the Dockerfile's `ARG PYTHON_IMAGE`, since no registry is reachable. Then loaded into the nodes'
# containerd of the clusters `make clusters-up` started, if any.
#
# Images are cached as docker-archives, keyed by their inputs, under
#   ${LPO_CACHE_DIR:-$HOME/.cache/liqo-peering-operator}/images/{python-base,operator}-<hash>.tar
# and .local/images.json says which ones belong to this checkout (testenv.localk8s.images reads it).
# A warm run (nothing changed) takes about a second.
#
# `hack/build-images.sh --verify` then builds the operator image once more, from the same inputs in a new
# storage, and fails unless it is the same image as the cached one (the same config and layer digests),
# printing what differs: the image is reproducible (docs/operations/releases.md). A stamp beside the
# archive records that these inputs were reproduced, so that a later run with the same inputs skips it.
set -euo pipefail
verify=false
if [[ ${1:-} == --verify ]]; then verify=true; fi
cd "$(dirname "$0")/.."
root=$PWD
start=$SECONDS
hack/install-node-runtime.sh
cache=${LPO_CACHE_DIR:-$HOME/.cache/liqo-peering-operator}/images
mkdir -p "$cache" .local

hash_of() { cat "$@" | sha256sum | cut -c1-16; }

# The base: its name is whatever the Dockerfile asks for; its key is the recipe and that name.
python_image=$(sed -n 's/^ARG PYTHON_IMAGE=//p' Dockerfile)
[[ -n $python_image ]] || { echo "error: no ARG PYTHON_IMAGE=... in Dockerfile" >&2; exit 1; }
base_key=$(hash_of hack/images/python-base.sh <(echo "$python_image"))
base_archive=$cache/python-base-$base_key.tar
if [[ ! -f $base_archive ]]; then
    echo "building the base image $python_image from Debian's packages (mmdebstrap)"
    step=$SECONDS
    rootfs=$(mktemp "$cache/.rootfs-XXXXXX.tar")
    trap 'rm -f "$rootfs"' EXIT
    hack/images/python-base.sh "$rootfs"
    config='{"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"], "Cmd": ["python3"]}'
    PYTHONPATH=$root .venv/bin/python -m testenv.localk8s archive "$rootfs" "$python_image" "$base_archive" "$config"
    rm -f "$rootfs"
    trap - EXIT
    echo "built $python_image in $((SECONDS - step))s"
fi

# The operator: everything the Dockerfile's context holds (.dockerignore: pyproject.toml, uv.lock, operator/ and
# hack/images/rootfs.py).
operator_key=$(hash_of Dockerfile .dockerignore hack/images/rootfs.py <(echo "$base_key") \
    <(find pyproject.toml uv.lock operator -type f ! -path '*/__pycache__/*' ! -name '*.pyc' ! -path '*.egg-info/*' \
        | LC_ALL=C sort | xargs sha256sum))
operator_ref=localhost/liqo-peering-operator:$operator_key
operator_archive=$cache/operator-$operator_key.tar
# Every file's time and the image's creation time: SOURCE_DATE_EPOCH (default 0), for the same digest.
epoch=${SOURCE_DATE_EPOCH:-0}
build_operator() {  # OUT.tar
    local out=$1 store
    echo "building $operator_ref from the Dockerfile (buildah)"
    step=$SECONDS
    # A storage of our own, thrown away after the build: vfs needs no mounts, so nothing is left behind.
    store=$(mktemp -d "$cache/.buildah-XXXXXX")
    trap 'rm -rf "$store"' EXIT
    buildah=(buildah --root "$store/root" --runroot "$store/run" --storage-driver vfs)
    "${buildah[@]}" pull --quiet "docker-archive:$base_archive" >/dev/null
    # pip in the build stage fetches the dependencies (uv.lock's versions and hashes) from the index: the
    # host's network and, where the host reaches it through a TLS-intercepting proxy, the host's CA bundle,
    # which pip is told to trust (both mounted for the build's RUN steps only, beside the base's own CA
    # bundle, which the image keeps).
    printf '[global]\ncert = /tmp/host-ca.crt\n' >"$store/pip.conf"
    "${buildah[@]}" build --quiet --network host --pull=never --layers=false \
        --timestamp "$epoch" --build-arg SOURCE_DATE_EPOCH="$epoch" \
        --volume /etc/ssl/certs/ca-certificates.crt:/tmp/host-ca.crt:ro \
        --volume "$store/pip.conf:/etc/pip.conf:ro" \
        --tag "$operator_ref" --file Dockerfile . >/dev/null
    "${buildah[@]}" push --quiet "$operator_ref" "docker-archive:$out.tmp:$operator_ref"
    mv -f "$out.tmp" "$out"
    rm -rf "$store"
    trap - EXIT
    echo "built $operator_ref in $((SECONDS - step))s"
}
if [[ ! -f $operator_archive ]]; then
    build_operator "$operator_archive"
fi
if $verify && [[ -f $operator_archive.reproduced ]]; then
    echo "$operator_ref: reproduced before from the same inputs ($operator_archive.reproduced)"
elif $verify; then
    again=$(mktemp "$cache/.verify-XXXXXX.tar")
    build_operator "$again"
    PYTHONPATH=$root .venv/bin/python -m testenv.localk8s compare "$operator_archive" "$again" \
        || { rm -f "$again"; echo "error: $operator_ref is not reproducible (above: what differs)" >&2; exit 1; }
    rm -f "$again"
    touch "$operator_archive.reproduced"
fi

# Each change to the operator's code makes a new archive: keep the three newest of each image (other
# checkouts may still use theirs), drop the rest.
for name in python-base operator; do
    ls -t "$cache/$name"-*.tar | tail -n +4 | xargs -r rm -f
done
for stamp in "$cache"/operator-*.tar.reproduced; do
    if [[ -f $stamp && ! -f ${stamp%.reproduced} ]]; then rm -f "$stamp"; fi
done

python_size=$(stat -c %s "$base_archive")
operator_size=$(stat -c %s "$operator_archive")
cat >.local/images.json <<EOF
{
  "python-base": {"ref": "$python_image", "archive": "$base_archive", "bytes": $python_size},
  "operator": {"ref": "$operator_ref", "archive": "$operator_archive", "bytes": $operator_size}
}
EOF
echo "images: $python_image ($((python_size / 1000000)) MB), $operator_ref ($((operator_size / 1000000)) MB)"
if [[ -d .local/clusters ]]; then
    PYTHONPATH=$root .venv/bin/python -m testenv.localk8s load --dir .local/clusters "$operator_archive" "$base_archive"
fi
echo "images ready in $((SECONDS - start))s"
