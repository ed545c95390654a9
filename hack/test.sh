#!/usr/bin/env bash
# The whole suite, as CI runs it: venv, tool builds (cached), lint, generated-file drift, the docs site, unit
# and e2e tests.
# Prints how long each phase took.
set -euo pipefail
cd "$(dirname "$0")/.."

declare -a TIMES=()
# shellcheck source=build-lib.sh
source hack/build-lib.sh  # cpu_seconds
phase() {
  local name=$1; shift
  local start=$SECONDS cpu
  local me=$BASHPID  # this shell, or the build lane's subshell
  cpu=$(cpu_seconds "$me")
  echo "==> [$name] $*"
  local rc=0
  "$@" || rc=$?
  local took=$((SECONDS - start)) used=$(($(cpu_seconds "$me") - cpu))
  TIMES+=("$(printf '%-18s %5ds  CPU %6ds%s' "$name" "$took" "$used" "$( ((rc)) && echo " (failed: exit $rc)")")")
  echo "==> [$name] done in ${took}s, CPU ${used}s (exit $rc)"
  return $rc
}
report() {
  echo "==> phase times:"
  for t in "${TIMES[@]}"; do echo "    $t"; done
  # What failed, again after the times: the end of a long log is all a CI page may keep.
  if [[ ${TIMES[-1]:-} == tests*failed* ]]; then
    PYTHONPATH=. .venv/bin/python -m testenv.failures .local/junit-*.xml || true
  fi
}
trap report EXIT
# The Liqo the full suite runs; the other versions (LIQO_MATRIX) are those of the tier matrix.
# shellcheck source=versions.env
liqo_version=$(source hack/versions.env && echo "$LIQO_VERSION")

# Every Go module the builds need downloads in the background (hack/go-download.sh): on an empty module
# cache the downloads overlap the compiling.
mkdir -p .local
hack/go-download.sh >.local/go-download.log 2>&1 &
downloads=$!

phase venv hack/venv.sh
# The nodes' container runtime (Debian packages) first: apt takes a lock that the other builds must not race for.
phase runtime hack/install-node-runtime.sh
# The builds, in two lanes side by side: one Go build keeps about one core busy (its package graph has long
# chains), so on an empty cache two lanes use both. Kubernetes, the tools (Prometheus among them),
# kube-router and cosign take one lane (about 2,260 CPU-s on an empty cache); Liqo (each version, with its
# images) and Flux's source- and helm-controller (the nodes tier's HelmRelease test) the other (about 2,270).
# Two builds only one tier runs, late in its lane, are not built here: the tests leave part of both cores
# idle, so hack/run-tests.sh builds them beside the first tiers, and only that tier waits: the oldest
# Kubernetes (the solo tier; about 675 CPU-s) and Argo CD, kustomize and Flux's kustomize-controller (the
# gitops tier; 580). The matrix tier's Liqo versions are built here: in the background they held up their
# tier, first of its lane, by more than 28 minutes. Each lane runs in a subshell of its own, so that a
# phase's CPU time counts only its own builds; each stops at its first failure, and the second lane's log
# follows.
read -ra matrix <<<"$(source hack/versions.env && echo "$LIQO_MATRIX")"
liqo_builds() { # <version>: Liqo's control plane (and liqoctl), then its images (Liqo's chart on the nodes)
  phase "liqo-$1" env LIQO_VERSION="$1" hack/build-liqo.sh || return
  phase "liqo-images-$1" env LIQO_VERSION="$1" hack/build-liqo-images.sh || return
}
second_lane() {
  liqo_builds "$liqo_version" || return
  phase flux hack/build-gitops.sh source-controller helm-controller || return
  local v
  for v in "${matrix[@]}"; do liqo_builds "$v" || return; done
}
first_lane() {
  phase tools hack/build-tools.sh --no-floor || return
  if [[ -x hack/build-kstatus-check.sh ]]; then phase kstatus hack/build-kstatus-check.sh || return; fi
  # The upstream secretreader access provider plugin and ClusterProfile CRD (tests/e2e/test_clusterprofile.py).
  phase secretreader hack/build-secretreader.sh || return
  # kube-router, which enforces NetworkPolicies on the nodes tier's clusters (tests/e2e/test_network_policy.py).
  phase netpol hack/build-netpol.sh || return
  # cosign, for the release test's signatures.
  phase cosign hack/build-cosign.sh || return
}
in_lane() { # <lane function> <name>: the lane in a subshell; its phase times in .local/build-<name>.times
  (
    trap - EXIT
    TIMES=()
    rc=0
    "$1" || rc=$?
    printf '%s\n' "${TIMES[@]}" >".local/build-$2.times"
    exit "$rc"
  )
}
rm -f .local/build-first.times .local/build-second.times
# The operator image too, beside them: on an empty cache it is mostly downloading and unpacking Debian's and
# PyPI's packages (110 CPU-s in 6 minutes), and built with the tests the nodes tier waited for it.
(
  start=$SECONDS
  rc=0
  hack/build-images.sh >.local/build-image.log 2>&1 || rc=$?
  echo "==> [image] the operator image: exit $rc in $((SECONDS - start))s (.local/build-image.log)"
  exit "$rc"
) &
image=$!
in_lane first_lane first &  # its log as it goes
first=$!
in_lane second_lane second >.local/build-lane.log 2>&1 &
second=$!
lane_rc=0
wait "$first" || lane_rc=$?
wait "$second" || lane_rc=$((lane_rc ? lane_rc : $?))
wait "$image" || lane_rc=$((lane_rc ? lane_rc : $?))
cat .local/build-lane.log
for name in first second; do
  if [[ -s .local/build-$name.times ]]; then mapfile -t lane_times <".local/build-$name.times" && TIMES+=("${lane_times[@]}"); fi
done
if ((lane_rc)); then exit "$lane_rc"; fi
wait "$downloads" || true
echo "==> $(tail -n 1 .local/go-download.log) (in the background)"
phase lint hack/lint.sh
phase generated .venv/bin/python hack/crdgen.py --check
# The documentation site, built strictly (and its generated tables checked); tests/site renders it in
# headless Chromium.
phase docs hack/docs.sh build
phase chromium hack/install-chromium.sh
# The authenticating proxy that tests/e2e/test_liqo_chart.py puts in front of an API server (testenv/frontproxy.py).
phase nginx hack/apt-install.sh nginx-light
# tests/ and testenv/tests (the harness's own tests), in tiers side by side (hack/run-tests.sh). The JUnit
# reports in .local/ keep every test's time (setup, call and teardown) for finding what to make faster.
phase tests hack/run-tests.sh "$@"
