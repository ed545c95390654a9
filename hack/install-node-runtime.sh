#!/usr/bin/env bash
# Installs, from Debian's packages, what local clusters with nodes (testenv/localk8s) and the image builds
# (hack/build-images.sh) need: containerd and runc (one containerd per node), the CNI plugins (bridge,
# host-local, loopback), nftables (kube-proxy's nftables mode and the nodes' masquerade rule), iptables and
# ipset (kube-router's network policy controller, testenv/netpol.py), conntrack (its tests), buildah (the
# operator image, from the Dockerfile) and mmdebstrap (the Debian base image); and for the GitOps e2e
# tests, git (the test's Git server, `git http-backend`, and Argo CD's repo server) and redis-server
# (Argo CD's cache). Nothing is configured or
# started here: the harness runs its own containerd per node, with its own config, root and socket.
# A no-op (a few dpkg queries) when everything is installed already.
set -euo pipefail

exec "$(dirname "$0")/apt-install.sh" containerd runc containernetworking-plugins nftables iptables ipset conntrack buildah mmdebstrap git redis-server
