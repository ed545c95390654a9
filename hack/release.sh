#!/usr/bin/env bash
# `make release VERSION=x.y.z REGISTRY=host/path`: publishes a release into an OCI registry:
#   <REGISTRY>/liqo-peering-operator:<VERSION>          the operator image (from the Dockerfile), OCI format
#   <REGISTRY>/charts/liqo-peering-operator:<VERSION>   the Helm chart, whose version and appVersion are
#       VERSION and whose values name the image by tag and digest (`helm install oci://...` needs no --set)
#   an SPDX SBOM of the image (every Python distribution in it, with its version), attached to the image
#       as an OCI referrer (oras attach; artifact type application/spdx+json)
#   cosign signatures of the image and the chart, with COSIGN_KEY or COSIGN_KEYLESS (below)
# and writes them, with .local/release/<VERSION>/release.json (references and digests), locally.
# REGISTRY_CA=<file>: the CA that the registry's certificate chains to, where it is not a public one.
# Credentials: whatever buildah, helm and oras find (`buildah login`, `helm registry login`, `oras login`).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
start=$SECONDS
# The version's one place is pyproject.toml (Chart.yaml and the Dockerfile agree with it: a unit test
# checks); VERSION names another release of the same sources.
VERSION=${VERSION:-$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml | head -n 1)}
: "${REGISTRY:?REGISTRY=host/path is required}"
if [[ ! $VERSION =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
    echo "error: VERSION=$VERSION is not a semantic version (x.y.z)" >&2
    exit 1
fi
name=liqo-peering-operator
image=$REGISTRY/$name
out=$root/.local/release/$VERSION
rm -rf "$out"
mkdir -p "$out"

# The image: the one hack/build-images.sh builds from the Dockerfile (cached by its inputs), labelled with
# the release's version.
hack/build-images.sh >&2
built_ref=$(python3 -c 'import json; print(json.load(open(".local/images.json"))["operator"]["ref"])')
built_archive=$(python3 -c 'import json; print(json.load(open(".local/images.json"))["operator"]["archive"])')
helm=$(hack/tool-path.sh helm)
oras=$(hack/tool-path.sh oras)

# A storage of our own, thrown away at the end (vfs: no mounts left behind).
store=$(mktemp -d "${TMPDIR:-/tmp}/release-XXXXXX")
trap 'rm -rf "$store"' EXIT
buildah=(buildah --root "$store/root" --runroot "$store/run" --storage-driver vfs)
buildah_tls=() helm_tls=() oras_tls=() cosign_tls=()
if [[ -n ${REGISTRY_CA:-} ]]; then
    mkdir "$store/certs"
    cp "$REGISTRY_CA" "$store/certs/ca.crt"
    buildah_tls=(--cert-dir "$store/certs")
    helm_tls=(--ca-file "$REGISTRY_CA")
    oras_tls=(--ca-file "$REGISTRY_CA")
    cosign_tls=(--registry-cacert "$REGISTRY_CA")
fi

"${buildah[@]}" pull --quiet "docker-archive:$built_archive" >/dev/null
# The release's version as the image's label: a new config on the same layer (a LABEL is an empty layer when
# each step is committed, --layers), created at a fixed time: the same image and VERSION give the same digest.
mkdir "$store/context"
printf 'FROM %s\nLABEL org.opencontainers.image.version="%s"\n' "$built_ref" "$VERSION" >"$store/Containerfile"
"${buildah[@]}" build --quiet --pull=never --layers --format oci --timestamp "${SOURCE_DATE_EPOCH:-0}" \
    --tag "$image:$VERSION" --file "$store/Containerfile" "$store/context" >/dev/null
"${buildah[@]}" push --quiet "${buildah_tls[@]}" --digestfile "$out/image.digest" \
    "$image:$VERSION" "docker://$image:$VERSION"
digest=$(cat "$out/image.digest")
echo "pushed $image:$VERSION@$digest"
container=$("${buildah[@]}" from --pull=never --quiet "$image:$VERSION")

# The SBOM, by the image's own interpreter (what it imports from is what it lists).
"${buildah[@]}" run --volume "$root/hack/sbom.py:/tmp/sbom.py:ro" "$container" \
    python /tmp/sbom.py "$image" "$VERSION" "$digest" >"$out/sbom.spdx.json"
(cd "$out" && "$oras" attach "${oras_tls[@]}" --no-tty --artifact-type application/spdx+json \
    "$image@$digest" sbom.spdx.json:application/spdx+json >&2)
echo "attached the SBOM ($(grep -c '"versionInfo"' "$out/sbom.spdx.json") packages) to $image@$digest"

# The chart, with this version and image.
cp -r deploy/helm/$name "$store/$name"
chart=$store/$name
sed -i -E "s/^version: .*/version: $VERSION/; s/^appVersion: .*/appVersion: \"$VERSION\"/" "$chart/Chart.yaml"
# The image block's first lines (values.yaml's `image:` comes before any other repository/tag/digest).
sed -i -E "0,/^  repository: /s|^  repository: .*|  repository: $image|" "$chart/values.yaml"
sed -i -E "0,/^  tag: /s|^  tag: .*|  tag: \"$VERSION\"|" "$chart/values.yaml"
sed -i -E "0,/^  digest: /s|^  digest: .*|  digest: \"$digest\"|" "$chart/values.yaml"
# The committed chart names no image (image.repository is required): the packaged one must.
grep -qxF "  repository: $image" "$chart/values.yaml" || { echo "error: values.yaml has no image repository line" >&2; exit 1; }
grep -q "^  digest: \"$digest\"" "$chart/values.yaml" || { echo "error: values.yaml has no image digest line" >&2; exit 1; }
"$helm" package "$chart" --destination "$out" >&2
chart_digest=$("$helm" push "${helm_tls[@]}" "$out/$name-$VERSION.tgz" "oci://$REGISTRY/charts" 2>&1 \
    | tee /dev/stderr | sed -n 's/^Digest: //p')
echo "pushed oci://$REGISTRY/charts/$name:$VERSION@$chart_digest"

# Signatures of the image and the chart: COSIGN_KEY=<cosign.key> (its password in COSIGN_PASSWORD) signs
# with a key pair, kept out of Sigstore's public log; COSIGN_KEYLESS=1 with the CI's OIDC identity (GitHub
# Actions' id-token), recorded in that log. Without either, nothing is signed.
signed=false
if [[ -n ${COSIGN_KEY:-} || -n ${COSIGN_KEYLESS:-} ]]; then
    hack/build-cosign.sh >&2
    cosign=$(hack/tool-path.sh cosign)
    sign=()
    if [[ -n ${COSIGN_KEY:-} ]]; then sign=(--key "$COSIGN_KEY" --tlog-upload=false); fi
    for ref in "$image@$digest" "$REGISTRY/charts/$name@$chart_digest"; do
        "$cosign" sign --yes "${sign[@]}" "${cosign_tls[@]}" "$ref" >&2
    done
    signed=true
    echo "signed $image@$digest and the chart"
fi

cat >"$out/release.json" <<JSON
{
  "version": "$VERSION",
  "image": "$image:$VERSION",
  "image_digest": "$digest",
  "chart": "oci://$REGISTRY/charts/$name",
  "chart_digest": "$chart_digest",
  "sbom": "$out/sbom.spdx.json",
  "signed": $signed
}
JSON
echo "released $VERSION to $REGISTRY in $((SECONDS - start))s"
