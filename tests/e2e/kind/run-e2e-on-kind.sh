#!/usr/bin/env bash
# End to end on kind, for people WITH Docker (not run in this project's CI: see README.md here).
#
#   tests/e2e/kind/run-e2e-on-kind.sh        # create, install, peer, check, unpeer
#   tests/e2e/kind/run-e2e-on-kind.sh down   # delete the two kind clusters
#
# Two kind clusters (consumer, provider), real Liqo on both (liqoctl install kind), the operator image
# built here and loaded into the consumer, the chart installed from deploy/helm, then a LiqoPeering that
# must become Ready and, once deleted, be gone (the operator unpeered). Needs: docker, kind, liqoctl
# (matching LIQO_VERSION), helm, kubectl on PATH.
set -euo pipefail

cd "$(dirname "$0")/../../.."
# shellcheck source=hack/versions.env
source hack/versions.env

CONSUMER=${CONSUMER:-lpo-consumer}
PROVIDER=${PROVIDER:-lpo-provider}
IMAGE_REPO=${IMAGE_REPO:-liqo-peering-operator}
IMAGE_TAG=${IMAGE_TAG:-kind-e2e}
WORKDIR=${WORKDIR:-$PWD/.local/kind}
NAMESPACE=${NAMESPACE:-lpo-kind-e2e}
TIMEOUT=${TIMEOUT:-10m}

if [[ ${1:-} == down ]]; then
    kind delete cluster --name "$CONSUMER"
    kind delete cluster --name "$PROVIDER"
    rm -rf "$WORKDIR"
    exit 0
fi

for tool in docker kind liqoctl helm kubectl; do
    command -v "$tool" >/dev/null || { echo "error: $tool is not on PATH" >&2; exit 1; }
done
mkdir -p "$WORKDIR"

# Non-overlapping pod and service CIDRs, as Liqo's networking expects of two peered clusters.
create_cluster() { # name pod-cidr service-cidr
    if kind get clusters | grep -qx "$1"; then
        echo "kind cluster $1 exists: reused"
    else
        kind create cluster --name "$1" --config - <<EOF
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
networking:
  podSubnet: "$2"
  serviceSubnet: "$3"
EOF
    fi
    kind get kubeconfig --name "$1" >"$WORKDIR/$1.kubeconfig"
}
create_cluster "$CONSUMER" 10.200.0.0/16 10.96.0.0/16
create_cluster "$PROVIDER" 10.210.0.0/16 10.97.0.0/16
consumer_kc=$WORKDIR/$CONSUMER.kubeconfig
provider_kc=$WORKDIR/$PROVIDER.kubeconfig
# The operator runs in the consumer's pod network: it reaches the provider's API server by its
# container name on the kind Docker network, hence the --internal kubeconfig in the Secret.
kind get kubeconfig --internal --name "$PROVIDER" >"$WORKDIR/$PROVIDER.internal.kubeconfig"

for name in "$CONSUMER" "$PROVIDER"; do
    liqoctl install kind --kubeconfig "$WORKDIR/$name.kubeconfig" --cluster-id "$name" --version "v$LIQO_VERSION"
done

docker build --tag "$IMAGE_REPO:$IMAGE_TAG" .
kind load docker-image "$IMAGE_REPO:$IMAGE_TAG" --name "$CONSUMER"

helm upgrade --install lpo deploy/helm/liqo-peering-operator \
    --kubeconfig "$consumer_kc" --namespace liqo-peering-system --create-namespace \
    --set image.repository="$IMAGE_REPO" --set image.tag="$IMAGE_TAG" --set image.pullPolicy=Never \
    --wait --timeout 5m

k() { kubectl --kubeconfig "$consumer_kc" "$@"; }
k create namespace "$NAMESPACE" --dry-run=client -o yaml | k apply -f -
k -n "$NAMESPACE" create secret generic provider-kubeconfig \
    --from-file=kubeconfig="$WORKDIR/$PROVIDER.internal.kubeconfig" --dry-run=client -o yaml | k apply -f -
sed "s/namespace: default/namespace: $NAMESPACE/" examples/basic.yaml | k apply -f -

if ! k -n "$NAMESPACE" wait liqopeering/provider --for=condition=Ready --timeout="$TIMEOUT"; then
    k -n "$NAMESPACE" describe liqopeering/provider
    k -n liqo-peering-system logs deployment/lpo-liqo-peering-operator --tail=100
    exit 1
fi
k -n "$NAMESPACE" get liqopeering provider -o wide
k get foreignclusters -o wide
kubectl --kubeconfig "$provider_kc" get foreignclusters -o wide

k -n "$NAMESPACE" delete liqopeering provider --wait --timeout="$TIMEOUT"
echo "kind e2e passed: peered, Ready, unpeered. Remove the clusters with: $0 down"
