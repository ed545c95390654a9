#!/usr/bin/env bash
# `make demo`: builds what is missing (tools, the container runtime from Debian, the images), starts two
# local clusters with a real node each, installs Liqo on both with its own Helm chart (DEMO_LIQO=processes:
# Liqo's controllers as processes, the data plane stood in; DEMO_LIQO=standin: Liqo's objects and the
# lighter Liqo stand-in), installs the operator with Helm (a Pod on the consumer's node), applies an
# example LiqoPeering and waits until it is Ready.
# `make demo-down` (hack/demo.sh down) stops everything and removes .local/.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD:$PWD/operator"
if [[ ${1:-} == down ]]; then
    exec .venv/bin/python hack/demo.py down
fi
hack/venv.sh
hack/build-tools.sh
mode=${DEMO_LIQO:-chart}
if [[ $mode != standin ]]; then hack/build-liqo.sh; fi
hack/build-images.sh
if [[ $mode == chart ]]; then hack/build-liqo-images.sh; fi
.venv/bin/python hack/demo.py
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
