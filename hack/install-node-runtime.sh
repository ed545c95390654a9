#!/usr/bin/env bash
# Installs, from Debian's packages, what local clusters with nodes (testenv/localk8s) and the image builds
# (hack/build-images.sh) need: containerd and runc (one containerd per node), the CNI plugins (bridge,
# host-local, loopback), nftables (kube-proxy's nftables mode and the nodes' masquerade rule), buildah (the
# operator image, from the Dockerfile) and mmdebstrap (the Debian base image); and for the GitOps e2e
# tests, git (the test's Git server, `git http-backend`, and Argo CD's repo server) and redis-server
# (Argo CD's cache). Nothing is configured or
# started here: the harness runs its own containerd per node, with its own config, root and socket.
# A no-op (a few dpkg queries) when everything is installed already.
set -euo pipefail

packages=(containerd runc containernetworking-plugins nftables buildah mmdebstrap git redis-server)
missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
    exit 0
fi
sudo=()
if [[ $(id -u) != 0 ]]; then sudo=(sudo); fi
echo "installing ${missing[*]} (apt)"
start=$SECONDS
"${sudo[@]}" apt-get update -qq
# No recommends: fuse-overlayfs and friends are for rootless builds; everything here runs as root.
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "installed ${missing[*]} in $((SECONDS - start))s"
