#!/usr/bin/env bash
# Builds the Kubernetes components (control plane, and kube-scheduler, kubelet, kube-proxy for local
# clusters with nodes; the control plane of the oldest supported Kubernetes too), etcd, helm, CoreDNS, the
# registry, oras and Prometheus from their published Go modules (wrapper modules in hack/tools/<tool>/), and
# promtool from Debian's prometheus package, into a cache outside the repo:
#   ${LPO_CACHE_DIR:-$HOME/.cache/liqo-peering-operator}/tools/<tool>-<version>/<binary>
# Idempotent: only missing binaries are built, so a warm run takes well under a second.
# --no-floor: all but the oldest Kubernetes; --floor: that one alone (hack/run-tests.sh builds it beside the
# first tiers, for the one test that runs it); --demo: only what `make demo` runs (Kubernetes with its node
# components, kubectl, etcd, helm, CoreDNS), not the tools only the tests use.
# One build at a time: `make test` runs this beside hack/build-liqo.sh and hack/build-gitops.sh, since one
# `go build` keeps about one core busy.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
script_start=$SECONDS

# shellcheck source=versions.env
source hack/versions.env
what=${1:-all}
case $what in
    all | --no-floor | --floor | --demo) ;;
    *) echo "usage: $0 [--no-floor | --floor | --demo]" >&2; exit 2 ;;
esac
cache_dir=${LPO_CACHE_DIR:-$HOME/.cache/liqo-peering-operator}/tools

# shellcheck source=build-lib.sh
source hack/build-lib.sh  # require_version, build

require_version hack/tools/kubernetes k8s.io/kubernetes "v$KUBERNETES_VERSION"
require_version hack/tools/kubectl k8s.io/kubernetes "v$KUBERNETES_VERSION"
require_version hack/tools/etcd go.etcd.io/etcd/server/v3 "v$ETCD_VERSION"
require_version hack/tools/helm helm.sh/helm/v3 "v$HELM_VERSION"
require_version hack/tools/coredns github.com/coredns/coredns "v$COREDNS_VERSION"
require_version hack/tools/registry github.com/distribution/distribution/v3 "v$REGISTRY_VERSION"
require_version hack/tools/oras oras.land/oras "v$ORAS_VERSION"
require_version hack/tools/aws-iam-authenticator sigs.k8s.io/aws-iam-authenticator "v$AWS_IAM_AUTHENTICATOR_VERSION"
# Prometheus publishes release 3.16.0 as module version v0.316.0.
IFS=. read -r prom_major prom_minor prom_patch <<<"$PROMETHEUS_VERSION"
require_version hack/tools/prometheus github.com/prometheus/prometheus \
    "$(printf 'v0.%d%02d.%d' "$prom_major" "$prom_minor" "$prom_patch")"
require_version hack/tools/kubernetes-floor k8s.io/kubernetes "v$KUBERNETES_FLOOR_VERSION"
require_staging() { # <module dir> <kubernetes version>
    local staging="v0.${2#*.}"
    if grep -E '^\s*k8s\.io/[a-z-]+ => ' "$1/go.mod" | grep -vq " $staging\$"; then
        echo "error: $1/go.mod replaces a staging module with a version other than $staging" >&2
        exit 1
    fi
}
require_staging hack/tools/kubernetes "$KUBERNETES_VERSION"
require_staging hack/tools/kubernetes-floor "$KUBERNETES_FLOOR_VERSION"

# Kubernetes: stamp the version that /version reports (upstream: hack/lib/version.sh).
k8s_version_ldflags() { # <kubernetes version>
    local major=${1%%.*} minor=${1#*.} pkg flags=""
    minor=${minor%%.*}
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        flags+=" -X $pkg.gitVersion=v$1 -X $pkg.gitMajor=$major"
        flags+=" -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
        flags+=" -X $pkg.buildDate=1970-01-01T00:00:00Z"
    done
    echo "$flags"
}
# The oldest Kubernetes the chart supports: its control plane only (tests/e2e/test_kubernetes_floor.py
# runs no nodes). A module of its own, hack/tools/kubernetes-floor, built with the installed Go. A cold
# build took 675 CPU seconds.
build_floor() {
    local floor_ldflags floor_out cmd
    floor_ldflags=$(k8s_version_ldflags "$KUBERNETES_FLOOR_VERSION")
    floor_out=$cache_dir/kubernetes-$KUBERNETES_FLOOR_VERSION
    for cmd in kube-apiserver kube-controller-manager; do
        build hack/tools/kubernetes-floor "k8s.io/kubernetes/cmd/$cmd" "$floor_out/$cmd" "$floor_ldflags"
    done
}
if [[ $what == --floor ]]; then
    build_floor
    echo "the oldest Kubernetes ready in $((SECONDS - script_start))s"
    exit 0
fi
k8s_ldflags=$(k8s_version_ldflags "$KUBERNETES_VERSION")
k8s_out=$cache_dir/kubernetes-$KUBERNETES_VERSION
build hack/tools/kubernetes k8s.io/kubernetes/cmd/kube-apiserver "$k8s_out/kube-apiserver" "$k8s_ldflags"
build hack/tools/kubernetes k8s.io/kubernetes/cmd/kube-controller-manager \
    "$k8s_out/kube-controller-manager" "$k8s_ldflags"
# The nodes of local clusters (testenv/localk8s, nodes > 0): scheduling, the node agent, Services.
for cmd in kube-scheduler kubelet kube-proxy; do
    build hack/tools/kubernetes "k8s.io/kubernetes/cmd/$cmd" "$k8s_out/$cmd" "$k8s_ldflags"
done
# kubectl, for the demo and the `kubectl wait` checks: a module of its own (see hack/tools/kubectl/tools.go).
build hack/tools/kubectl k8s.io/kubernetes/cmd/kubectl "$k8s_out/kubectl" "$k8s_ldflags"

build hack/tools/etcd . "$cache_dir/etcd-$ETCD_VERSION/etcd" ""

# Helm: its version, plus the default Kubernetes version used by `helm template`/lint, derived
# from the client-go it links exactly as helm's Makefile does.
helm_client_go=$(awk '$1 == "k8s.io/client-go" {print $2; exit}' hack/tools/helm/go.mod)
helm_k8s_minor=$(cut -d. -f2 <<<"$helm_client_go")
helm_ldflags="-X helm.sh/helm/v3/internal/version.version=v$HELM_VERSION"
helm_ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    helm_ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$helm_k8s_minor"
done
build hack/tools/helm helm.sh/helm/v3/cmd/helm "$cache_dir/helm-$HELM_VERSION/helm" "$helm_ldflags"
# Cluster DNS for local clusters with nodes; the version it reports comes from the module itself.
build hack/tools/coredns . "$cache_dir/coredns-$COREDNS_VERSION/coredns" ""
if [[ $what == --demo ]]; then
    echo "the demo's tools ready in $((SECONDS - script_start))s"
    exit 0
fi
# Prometheus (the nodes tier scrapes the operator's Pod with it through the chart's ServiceMonitor and
# evaluates the chart's alerts and dashboard, tests/e2e/test_operator_pod.py): its server only, with
# Kubernetes service discovery alone of the discoveries (hack/tools/prometheus/build-tags), which
# Debian's package leaves out. A cold build took 395 CPU seconds (10 minutes of wall time on two cores
# shared with other builds); stamped with its version, as upstream's release builds are.
build hack/tools/prometheus github.com/prometheus/prometheus/cmd/prometheus \
    "$cache_dir/prometheus-$PROMETHEUS_VERSION/prometheus" \
    "-X github.com/prometheus/common/version.Version=$PROMETHEUS_VERSION"
# promtool (unit tests of the chart's alerting rules, tests/unit/test_alerts.py), taken from Debian's
# prometheus package (its binary only, nothing installed).
promtool_out=$cache_dir/promtool-$PROMTOOL_VERSION/promtool
if [[ ! -x $promtool_out ]]; then
    deb_version=$(apt-cache policy prometheus | awk '$1 == "Candidate:" {print $2}')
    if [[ -z $deb_version || $deb_version == "(none)" ]]; then
        apt-get update -qq
        deb_version=$(apt-cache policy prometheus | awk '$1 == "Candidate:" {print $2}')
    fi
    if [[ $deb_version != "$PROMTOOL_VERSION"+* ]]; then
        echo "error: Debian's prometheus package is '$deb_version', hack/versions.env says $PROMTOOL_VERSION" >&2
        exit 1
    fi
    deb_dir=$(mktemp -d)
    (cd "$deb_dir" && apt-get download -qq "prometheus=$deb_version" 2>/dev/null)
    dpkg-deb -x "$deb_dir"/prometheus_*.deb "$deb_dir/x"
    mkdir -p "$(dirname "$promtool_out")"
    cp "$deb_dir/x/usr/bin/promtool" "$promtool_out.tmp"
    mv -f "$promtool_out.tmp" "$promtool_out"
    rm -rf "$deb_dir"
    echo "promtool $deb_version from Debian's prometheus package"
fi
# The OCI registry the release e2e test pushes to and the nodes pull from.
build hack/tools/registry . "$cache_dir/registry-$REGISTRY_VERSION/registry" \
    "-X github.com/distribution/distribution/v3/version.version=v$REGISTRY_VERSION"
# oras, which attaches the SBOM to a released image (hack/release.sh).
build hack/tools/oras oras.land/oras/cmd/oras "$cache_dir/oras-$ORAS_VERSION/oras" \
    "-X oras.land/oras/internal/version.Version=$ORAS_VERSION -X oras.land/oras/internal/version.BuildMetadata="
# aws-iam-authenticator's server, which verifies EKS tokens as a provider's webhook in the tests.
build hack/tools/aws-iam-authenticator sigs.k8s.io/aws-iam-authenticator/cmd/aws-iam-authenticator \
    "$cache_dir/aws-iam-authenticator-$AWS_IAM_AUTHENTICATOR_VERSION/aws-iam-authenticator" \
    "-X sigs.k8s.io/aws-iam-authenticator/pkg.Version=$AWS_IAM_AUTHENTICATOR_VERSION"
# The GitHub Actions workflow linter for hack/lint.sh (which builds it too, when missing).
hack/build-actionlint.sh
if [[ $what == all ]]; then
    build_floor
fi
echo "tools ready in $((SECONDS - script_start))s"
