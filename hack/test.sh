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
  cpu=$(cpu_seconds)
  echo "==> [$name] $*"
  local rc=0
  "$@" || rc=$?
  local took=$((SECONDS - start)) used=$(($(cpu_seconds) - cpu))
  TIMES+=("$(printf '%-18s %5ds  CPU %6ds%s' "$name" "$took" "$used" "$( ((rc)) && echo " (failed: exit $rc)")")")
  echo "==> [$name] done in ${took}s, CPU ${used}s (exit $rc)"
  return $rc
}
report() {
  echo "==> phase times:"
  for t in "${TIMES[@]}"; do echo "    $t"; done
}
trap report EXIT
# The Liqo the full suite runs; the other versions (LIQO_MATRIX, tier matrix) are built in that tier's lane
# (hack/run-tests.sh), while the other tiers test.
# shellcheck source=versions.env
liqo_version=$(source hack/versions.env && echo "$LIQO_VERSION")

# Every Go module the builds need downloads in the background (hack/go-download.sh): on an empty module
# cache the downloads overlap the compiling.
mkdir -p .local
hack/go-download.sh >.local/go-download.log 2>&1 &
downloads=$!

phase venv hack/venv.sh
phase tools hack/build-tools.sh
if [[ -x hack/build-kstatus-check.sh ]]; then phase kstatus hack/build-kstatus-check.sh; fi
# Liqo's control plane (and liqoctl) for the realliqo e2e tests (testenv/liqo_real).
phase "liqo-$liqo_version" env LIQO_VERSION="$liqo_version" hack/build-liqo.sh
# The GitOps controllers for the GitOps e2e tests: Flux's source- and kustomize-controller, Argo CD, kustomize.
phase gitops hack/build-gitops.sh
# The nodes' container runtime (Debian packages). The operator's image builds beside the first tests
# (hack/run-tests.sh).
phase runtime hack/install-node-runtime.sh
# Liqo's images, from the same modules (the liqochart e2e tests: Liqo's chart installed with helm).
phase "liqo-images-$liqo_version" env LIQO_VERSION="$liqo_version" hack/build-liqo-images.sh
wait "$downloads" || true
echo "==> $(tail -n 1 .local/go-download.log) (in the background)"
phase lint hack/lint.sh
phase generated .venv/bin/python -m liqo_peering.api.crdgen --check
# The documentation site, built strictly (and its generated tables checked); tests/site renders it in
# headless Chromium.
phase docs hack/docs.sh build
phase chromium hack/install-chromium.sh
# tests/ and testenv/tests (the harness's own tests), in tiers side by side (hack/run-tests.sh). The JUnit
# reports in .local/ keep every test's time (setup, call and teardown) for finding what to make faster.
phase tests hack/run-tests.sh "$@"
