#!/usr/bin/env bash
# The test suite. With arguments: one pytest with them (files, -k, -m...; with no path, pytest's testpaths:
# tests/ and testenv/tests).
# Without (CI, `make test`): the suite's tiers (testenv.pytest_plugin TIERS: clusters of their own, none
# shared) in lanes that run side by side, each lane running its tiers one after the other, so that a tier's
# clusters are gone before the next starts. Each tier has its log and JUnit report in .local/; the logs
# are printed at the end, the reliability report is written from the tiers' parts, and the chart's RBAC is
# checked against the requests its ServiceAccount made (testenv.rbacproof).
set -uo pipefail
cd "$(dirname "$0")/.."

# The Go programs the tests run (API servers, etcd, kubelets, containerd, Liqo as processes) collect garbage
# half as often: tests/e2e/test_peering.py took 16 % less CPU time, its API servers up to 55 % more memory.
export GOGC=${GOGC:-200}
PYTEST=(.venv/bin/pytest -p no:cacheprovider --durations=15)
if (($#)); then
  exec "${PYTEST[@]}" --junitxml=.local/junit.xml "$@"
fi

# Lanes are separated by spaces, the tiers of a lane by commas. How many run side by side follows the machine
# (testenv/lanes.py: the cores the load leaves free, the memory): on two idle cores main; liqo; nodes (once
# the operator image is built) then standin; matrix (the other Liqo versions), solo, then gitops (last, so
# that its controllers have the longest to build), which take about as long (each tier's time is in its
# log's last line). A lane more than the machine carries makes every lane's waits longer. TEST_LANES sets
# them instead.
if [[ -n ${TEST_LANES:-} ]]; then
  LANES=$TEST_LANES
  echo "--> lanes: TEST_LANES"
else
  LANES=$(.venv/bin/python -m testenv.lanes) || exit 1
fi
# shellcheck source=build-lib.sh
source hack/build-lib.sh  # cpu_seconds
mkdir -p .local
# What an earlier run left (a build's <name>.failed marks its log for printing at the end).
rm -rf .local/reliability .local/rbac .local/build-matrix.log .local/build-matrix.failed .local/verify-image.log \
  .local/verify-image.failed .local/build-images.log .local/build-images.failed .local/build-gitops.log \
  .local/build-gitops.failed .local/build-floor.log .local/build-floor.failed .local/junit-*.xml

# The operator image (hack/build-images.sh) builds in the background from the start, holding
# .local/images.lock: only what runs or reads it (tier nodes, the reproducibility check) waits for it.
build_images() {
  local start=$SECONDS me=$BASHPID cpu
  cpu=$(cpu_seconds "$me")
  echo "--> operator image: started (log: .local/build-images.log)"
  # The lock is this function's: nothing the build leaves running may hold it.
  if ! nice -n 10 hack/build-images.sh 9>&- >.local/build-images.log 2>&1; then
    touch .local/build-images.failed
    echo "--> operator image: the build failed (.local/build-images.log)"
    return 1
  fi
  echo "--> operator image: built in $((SECONDS - start))s, CPU $(($(cpu_seconds "$me") - cpu))s"
}
# Blocks until the build has ended; false if it failed.
image_built() {
  flock -s .local/images.lock true && [[ ! -f .local/build-images.failed ]]
}
# The other Liqo versions (LIQO_MATRIX): `make test` builds them before the tests, so that this finds them
# cached in seconds; otherwise they build here, in the background from the start of the matrix tier's lane,
# which waits for them before that tier. Their log: .local/build-matrix.log.
build_matrix() {
  local v start=$SECONDS me=$BASHPID cpu
  cpu=$(cpu_seconds "$me")
  echo "--> matrix builds: started (log: .local/build-matrix.log)"
  for v in $(source hack/versions.env && echo "$LIQO_MATRIX"); do
    if ! { env -u GOGC LIQO_VERSION="$v" nice -n 10 hack/build-liqo.sh && LIQO_VERSION=$v nice -n 10 hack/build-liqo-images.sh; } \
      >>.local/build-matrix.log 2>&1; then
      touch .local/build-matrix.failed
      return 1
    fi
  done
  echo "--> matrix builds: done in $((SECONDS - start))s, CPU $(($(cpu_seconds "$me") - cpu))s"
}

# The oldest Kubernetes (hack/build-tools.sh --floor), which only the solo tier runs, is built in the background
# once its lane's matrix builds are done (from the lane's start if it has no matrix tier); the lane waits for
# it before that tier. Its log: .local/build-floor.log.
build_floor() {
  local start=$SECONDS me=$BASHPID cpu
  cpu=$(cpu_seconds "$me")
  echo "--> the oldest Kubernetes: started (log: .local/build-floor.log)"
  if ! env -u GOGC nice -n 10 hack/build-tools.sh --floor >.local/build-floor.log 2>&1; then
    touch .local/build-floor.failed
    return 1
  fi
  echo "--> the oldest Kubernetes: built in $((SECONDS - start))s, CPU $(($(cpu_seconds "$me") - cpu))s"
}

# The GitOps tools only the gitops tier runs (Argo CD, kustomize, Flux's kustomize-controller;
# hack/build-gitops.sh) build in the background from the start of that tier's lane, which waits for them
# before that tier: `make test` builds them (like the oldest Kubernetes) beside the first tiers, whose waits
# leave part of both cores idle. On a warm cache this takes a second. Their log: .local/build-gitops.log.
build_gitops() {
  local start=$SECONDS me=$BASHPID cpu
  cpu=$(cpu_seconds "$me")
  echo "--> GitOps tools: started (log: .local/build-gitops.log)"
  # Without the tests' GOGC: the builds keep their own (hack/build-lib.sh).
  # Every GitOps tool: those `make test` built already (Flux's source- and helm-controller) are cached.
  if ! env -u GOGC nice -n 10 hack/build-gitops.sh >.local/build-gitops.log 2>&1; then
    touch .local/build-gitops.failed
    return 1
  fi
  echo "--> GitOps tools: built in $((SECONDS - start))s, CPU $(($(cpu_seconds "$me") - cpu))s"
}

# The operator image is reproducible: built once more from the same inputs, in a new storage, it must be the
# same image (config and layer digests) as the one the tests run, once per set of inputs (a stamp beside the
# cached archive says they were reproduced). Beside the matrix tier, the shortest lane.
# Its log: .local/verify-image.log.
verify_image() {
  local start me=$BASHPID cpu
  image_built || return 1
  start=$SECONDS
  cpu=$(cpu_seconds "$me")
  echo "--> image rebuilt to compare: started (log: .local/verify-image.log)"
  if ! nice -n 10 hack/build-images.sh --verify >.local/verify-image.log 2>&1; then
    echo "--> image rebuilt to compare: it differs, or the build failed (.local/verify-image.log)"
    touch .local/verify-image.failed
    return 1
  fi
  if grep -q "reproduced before" .local/verify-image.log; then
    echo "--> image rebuilt to compare: reproduced before from the same inputs (.local/verify-image.log)"
  else
    echo "--> image rebuilt to compare: the same image, in $((SECONDS - start))s, CPU $(($(cpu_seconds "$me") - cpu))s"
  fi
}

# Each lane in a cgroup of its own in the cgroup-v1 cpu hierarchy, when there is one to write to. Outside it,
# the kernel's autogroup scheduling gives every session (each cluster process, each operator) the same weight,
# so a lane's share would follow how many processes it has. In it, the lane's processes share its weight, and
# the lane with the liqo tier weighs LIQO_LANE_SHARES (default 3x): its tests wait on Liqo's own reactions
# one after the other, the longest chain of the suite.
CPU_CGROUP=/sys/fs/cgroup/cpu/lpo-tests-$$
lane_cgroup() {
  local dir="$CPU_CGROUP/${1//,/-}" shares=1024
  [[ -w /sys/fs/cgroup/cpu/cgroup.procs ]] || return 0
  if [[ ,$1, == *,liqo,* ]]; then shares=${LIQO_LANE_SHARES:-3072}; fi
  mkdir -p "$dir" 2>/dev/null && echo "$shares" >"$dir/cpu.shares" && echo "$BASHPID" >"$dir/cgroup.procs" ||
    echo "--> lane $1: no cpu cgroup of its own ($dir)"
}

lane() {
  local tier start cpu me=$BASHPID rc=0 builds="" verify="" gitops="" floor="" floor_after_matrix=0
  lane_cgroup "$1"
  if [[ ,$1, == *,matrix,*solo,* ]]; then floor_after_matrix=1; fi
  if [[ ,$1, == *,gitops,* ]]; then
    build_gitops &
    gitops=$!
  fi
  if [[ ,$1, == *,matrix,* ]]; then
    build_matrix &
    builds=$!
    verify_image &
    verify=$!
  fi
  if [[ ,$1, == *,solo,* ]] && ((!floor_after_matrix)); then
    build_floor &
    floor=$!
  fi
  for tier in ${1//,/ }; do
    if [[ $tier == matrix ]]; then
      local built=0
      wait "$builds" || built=$?
      if ((floor_after_matrix)); then
        build_floor &
        floor=$!
      fi
      if ((built)); then
        echo "--> matrix builds: failed; the tier does not run (.local/build-matrix.log)"
        rc=1
        continue
      fi
    fi
    if [[ $tier == solo && -n $floor ]] && ! wait "$floor"; then
      echo "--> the oldest Kubernetes: the build failed; the tier does not run (.local/build-floor.log)"
      rc=1
      continue
    fi
    if [[ $tier == gitops ]] && ! wait "$gitops"; then
      echo "--> GitOps tools: the build failed; the tier does not run (.local/build-gitops.log)"
      rc=1
      continue
    fi
    if [[ $tier == nodes ]] && ! image_built; then
      echo "--> operator image: failed; the tier nodes does not run (.local/build-images.log)"
      rc=1
      continue
    fi
    start=$SECONDS
    cpu=$(cpu_seconds "$me")  # the lane's: $BASHPID inside $(...) would be the substitution's own
    echo "--> tier $tier: started (log: .local/tests-$tier.log)"
    "${PYTEST[@]}" tests testenv/tests --tier "$tier" --junitxml=".local/junit-$tier.xml" \
      >".local/tests-$tier.log" 2>&1
    local code=$?
    echo "--> tier $tier: exit $code in $((SECONDS - start))s, CPU $(($(cpu_seconds "$me") - cpu))s" \
      "($(tail -n 1 ".local/tests-$tier.log"))"
    ((code == 0)) || rc=1
  done
  if [[ -n $verify ]] && ! wait "$verify"; then
    rc=1
  fi
  return $rc
}

exec 9>.local/images.lock
flock 9
build_images &
pids=($!)
exec 9>&-
trap 'kill -TERM "${pids[@]}" 2>/dev/null; wait' INT TERM
for l in $LANES; do
  lane "$l" &
  pids+=($!)
done
rc=0
for pid in "${pids[@]}"; do
  wait "$pid" || rc=1
done
rmdir "$CPU_CGROUP"/* "$CPU_CGROUP" 2>/dev/null || true

for build in build-images build-matrix build-floor build-gitops verify-image; do
  if [[ -f .local/$build.failed ]]; then
    echo
    echo "==================== $build (.local/$build.log) ===================="
    cat ".local/$build.log"
  fi
done
for l in $LANES; do
  for tier in ${l//,/ }; do
    echo
    echo "==================== tier $tier (.local/tests-$tier.log) ===================="
    cat ".local/tests-$tier.log" 2>/dev/null || echo "(not run)"
  done
done
.venv/bin/python -m testenv.reliability merge
# The chart's RBAC against the requests its ServiceAccount made in every tier (testenv.rbacproof): a request
# refused, or a grant no request of the full suite used, fails the run. Every tier's operator runs as the
# chart's ServiceAccount (a Pod, or a process with its token: testenv.chart_rbac).
echo
.venv/bin/python -m testenv.rbacproof check || rc=1
.venv/bin/python -m testenv.failures .local/junit-*.xml
exit $rc
