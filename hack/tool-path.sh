#!/usr/bin/env bash
# Prints the cached path of a tool binary built by hack/build-tools.sh,
# and of the GitOps controllers built by hack/build-gitops.sh.
# Usage: hack/tool-path.sh kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|kube-proxy|kubectl|etcd|helm|coredns|promtool|prometheus|registry|oras|cosign
#                          |source-controller|kustomize-controller|helm-controller|argocd|argocd-lua-health|kustomize
#                          |actionlint|kube-router|aws-iam-authenticator
set -euo pipefail
here=$(dirname "$0")
# shellcheck source=versions.env
source "$here/versions.env"
cache_dir=${LPO_CACHE_DIR:-$HOME/.cache/liqo-peering-operator}/tools
case ${1:-} in
    kube-apiserver | kube-controller-manager | kube-scheduler | kubelet | kube-proxy | kubectl)
        dir=kubernetes-$KUBERNETES_VERSION
        ;;
    etcd) dir=etcd-$ETCD_VERSION ;;
    helm) dir=helm-$HELM_VERSION ;;
    coredns) dir=coredns-$COREDNS_VERSION ;;
    promtool) dir=promtool-$PROMTOOL_VERSION ;;
    prometheus) dir=prometheus-$PROMETHEUS_VERSION ;;
    registry) dir=registry-$REGISTRY_VERSION ;;
    oras) dir=oras-$ORAS_VERSION ;;
    aws-iam-authenticator) dir=aws-iam-authenticator-$AWS_IAM_AUTHENTICATOR_VERSION ;;
    cosign) dir=cosign-$COSIGN_VERSION build=hack/build-cosign.sh ;;
    source-controller) dir=source-controller-$FLUX_SOURCE_CONTROLLER_VERSION build=hack/build-gitops.sh ;;
    kustomize-controller) dir=kustomize-controller-$FLUX_KUSTOMIZE_CONTROLLER_VERSION build=hack/build-gitops.sh ;;
    helm-controller) dir=helm-controller-$FLUX_HELM_CONTROLLER_VERSION build=hack/build-gitops.sh ;;
    argocd | argocd-lua-health) dir=argocd-$ARGOCD_VERSION build=hack/build-gitops.sh ;;
    kustomize) dir=kustomize-$KUSTOMIZE_VERSION build=hack/build-gitops.sh ;;
    actionlint) dir=actionlint-$ACTIONLINT_VERSION build=hack/build-actionlint.sh ;;
    kube-router) dir=kube-router-$KUBE_ROUTER_VERSION build=hack/build-netpol.sh ;;
    *)
        echo "usage: $0 kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|kube-proxy|kubectl|etcd|helm|coredns|promtool|prometheus|registry|oras|cosign|source-controller|kustomize-controller|helm-controller|argocd|argocd-lua-health|kustomize|actionlint|kube-router|aws-iam-authenticator" >&2
        exit 2
        ;;
esac
path=$cache_dir/$dir/$1
if [[ ! -x $path ]]; then
    echo "error: $path is missing; run ${build:-'make tools'}" >&2
    exit 1
fi
echo "$path"
