#!/usr/bin/env bash
# `make demo`: builds what is missing (tools, the container runtime from Debian, the images; side by side),
# starts two local clusters with a real node each, installs Liqo on both with its own Helm chart (DEMO_LIQO=processes:
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
# A phase in the background (its output in .local/demo-<name>.log), and the end of one: the builds run side
# by side, since each spends part of its time on one core (linking) or on the network (modules, packages).
started() {
    local name=$1
    shift
    echo "==> [$name] $* (log: .local/demo-$name.log)"
    (
        start=$SECONDS rc=0
        "$@" >".local/demo-$name.log" 2>&1 || rc=$?
        echo $((SECONDS - start)) >".local/demo-$name.time"
        exit $rc
    ) &
}
ended() { # <name> <pid>
    local rc=0 took
    wait "$2" || rc=$?
    took=$(cat ".local/demo-$1.time" 2>/dev/null || echo "?")
    if ((rc)); then
        echo "==> [$1] failed (exit $rc) in ${took}s; the end of .local/demo-$1.log:"
        tail -n 40 ".local/demo-$1.log"
        exit "$rc"
    fi
    TIMES+=("$(printf '%-12s %5ss' "$1" "$took")")
    echo "==> [$1] done in ${took}s"
}
demo_start=$SECONDS
phase venv hack/venv.sh
mkdir -p .local
mode=${DEMO_LIQO:-chart}
# shellcheck source=versions.env
source hack/versions.env
# Only the Go modules the demo builds, downloaded while the builds compile what they have.
modules=(hack/tools/kubernetes hack/tools/kubectl hack/tools/etcd hack/tools/helm hack/tools/coredns)
if [[ $mode != standin ]]; then modules+=("hack/tools/liqo/v$LIQO_VERSION"); fi
hack/go-download.sh "${modules[@]}" >.local/demo-go-download.log 2>&1 &
# Only what the demo runs: the tools only the tests use are built by `make test`.
started tools hack/build-tools.sh --demo
tools=$!
# Liqo's binaries but liqoctl, which the demo never runs (its build took 230 CPU seconds).
if [[ $mode != standin ]]; then
    started liqo hack/build-liqo.sh ipam crd-replicator liqo-controller-manager virtual-kubelet webhook
    liqo=$!
fi
# The container runtime and the image tools from Debian, then the operator's image.
started image hack/build-images.sh
image=$!
ended image "$image"
if [[ $mode != standin ]]; then ended liqo "$liqo"; fi
if [[ $mode == chart ]]; then
    started liqo-images hack/build-liqo-images.sh
    liqo_images=$!
    ended liqo-images "$liqo_images"
fi
ended tools "$tools"
wait
phase clusters .venv/bin/python hack/demo.py
TIMES+=("$(printf '%-12s %5ds' total $((SECONDS - demo_start)))")
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
