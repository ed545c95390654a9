#!/usr/bin/env bash
# `make demo`: builds what is missing (tools, the container runtime from Debian, the images), starts two
# local clusters with a real node each, installs Liqo on both with its own Helm chart (DEMO_LIQO=processes:
# Liqo's controllers as processes, the data plane stood in; DEMO_LIQO=standin: Liqo's objects and the
# lighter Liqo stand-in), installs the operator with Helm (a Pod on the consumer's node), applies an
# example LiqoPeering and waits until it is Ready.
# `make demo-down` (hack/demo.sh down) stops everything and removes the clusters' and the demo's state in .local/.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD:$PWD/operator"
if [[ ${1:-} == down ]]; then
    exec .venv/bin/python hack/demo.py down
fi
# Each phase's time, printed as it ends and again at the end: a cold demo spends them building.
declare -a TIMES=()
phase() {
    local name=$1 start=$SECONDS
    shift
    echo "==> [$name] $*"
    "$@"
    TIMES+=("$(printf '%-12s %5ds' "$name" $((SECONDS - start)))")
    echo "==> [$name] done in $((SECONDS - start))s"
}
phase venv hack/venv.sh
# Only what the demo runs: the tools only the tests use are built by `make test`.
phase tools hack/build-tools.sh --demo
mode=${DEMO_LIQO:-chart}
# Liqo's binaries but liqoctl, which the demo never runs (its build took 230 CPU seconds).
if [[ $mode != standin ]]; then
    phase liqo hack/build-liqo.sh ipam crd-replicator liqo-controller-manager virtual-kubelet webhook
fi
phase image hack/build-images.sh
if [[ $mode == chart ]]; then phase liqo-images hack/build-liqo-images.sh; fi
phase clusters .venv/bin/python hack/demo.py
echo "==> phase times:"
printf '    %s\n' "${TIMES[@]}"
kubectl=$(hack/tool-path.sh kubectl 2>/dev/null || command -v kubectl || true)
export KUBECONFIG=$PWD/.local/clusters/consumer.kubeconfig
if [[ -n $kubectl ]]; then
    echo; echo "\$ kubectl get pods -n liqo-peering -o wide"; "$kubectl" get pods -n liqo-peering -o wide
    echo; echo "\$ kubectl get lp -A -o wide"; "$kubectl" get lp -A -o wide
    echo; echo "\$ kubectl get foreignclusters"; "$kubectl" get foreignclusters
fi
cat <<EOM

The demo is running. Try:
  export KUBECONFIG=$KUBECONFIG
  kubectl describe lp -n default provider
  kubectl get lp -A -o wide -w
  kubectl logs -n liqo-peering deploy/liqo-peering-operator
Logs: kubectl logs -n liqo (Liqo), .local/demo/ (DEMO_LIQO=processes or standin), and the operator's
through kubectl logs
Tear it all down with: make demo-down
EOM
