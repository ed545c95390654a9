#!/usr/bin/env bash
# `make demo`: builds what is missing, starts two local clusters running Liqo's real control plane
# (DEMO_LIQO=standin: Liqo's objects and the lighter Liqo stand-in instead), runs the operator, applies
# examples/basic.yaml and waits until the peering is Ready.
# `make demo-down` (hack/demo.sh down) stops everything and removes .local/.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD:$PWD/operator"
if [[ ${1:-} == down ]]; then
    exec .venv/bin/python hack/demo.py down
fi
hack/venv.sh
hack/build-tools.sh
if [[ ${DEMO_LIQO:-real} == real ]]; then hack/build-liqo.sh; fi
.venv/bin/python hack/demo.py
kubectl=$(hack/tool-path.sh kubectl 2>/dev/null || command -v kubectl || true)
export KUBECONFIG=$PWD/.local/clusters/consumer.kubeconfig
if [[ -n $kubectl ]]; then
    echo; echo "\$ kubectl get lp -A -o wide"; "$kubectl" get lp -A -o wide
    echo; echo "\$ kubectl get foreignclusters"; "$kubectl" get foreignclusters
fi
cat <<EOM

The demo is running. Try:
  export KUBECONFIG=$KUBECONFIG
  kubectl describe lp -n default provider
  kubectl get lp -A -o wide -w
Logs: .local/demo/ (operator.log, and liqo-real.log or liqo-standin.log)
Tear it all down with: make demo-down
EOM
