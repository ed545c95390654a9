"""Every other Liqo release of LIQO_MATRIX (hack/versions.env), as users install it: Liqo's own chart of that
version (testenv.liqo_chart), its images built here (LIQO_VERSION=<v> hack/build-liqo-images.sh), real
gateways with userspace WireGuard, on a pair of clusters with a node each. Marker `liqomatrix`, tier
`matrix`; the full real-Liqo suite runs on LIQO_VERSION (tests/e2e/test_real_liqo.py).

On each version, in this order and on one pair: a LiqoPeering becomes Ready, a Pod is offloaded to the
provider's node, a spec change is applied, the unpeering leaves nothing on either cluster, then a
`liqoctl peer` of the same version is adopted. On the version one minor below LIQO_VERSION, Liqo is then
upgraded under that live peering with LIQO_VERSION's chart (`helm upgrade`, the provider first): meanwhile
the peering shows LiqoVersionSkew and carries on while a new peering between the two versions is refused;
once the consumer is upgraded too it is Ready by itself, none of its objects re-created. Last, the peering
unpeers and leaves nothing.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest

from testenv import chart_rbac
from testenv import kube as k
from testenv.leakscan import LeakScan
from testenv.liqo_chart import NAMESPACE as LIQO_NAMESPACE
from testenv.liqo_chart import LiqoChartPair, liqo_images
from testenv.liqo_env import liqo_matrix, liqo_version, upgraded_from
from testenv.liqo_real import liqo_binary
from testenv.liqo_real.pytest_plugin import start_chart_pair
from testenv.offload import offload_a_pod, offloaded_pods, ready
from testenv.operator_support import (
    SECRET,
    OperatorProcess,
    Peerings,
    api_client,
    get,
    install_crd,
    items,
    tenant_ns,
    wait_for,
)
from testenv.real_pair import (
    RealPair,
    assert_one_of_each,
    case_namespace,
    every_object_uids,
    object_uids,
    unpeer,
    wait_liqo_done,
)

pytestmark = [pytest.mark.liqomatrix, pytest.mark.liqochart]

NAME = "provider"
VERSIONS = liqo_matrix()
TARGET = liqo_version()  # what the full suite runs, and what the upgrade goes to

UPGRADED = upgraded_from(VERSIONS, TARGET)  # upgraded to TARGET under a live peering
# The provider's CSR signer issues certificates this short-lived (kube-controller-manager backdates them by five
# minutes: valid for nine, due for renewal after one), where Liqo does not renew them itself (before v1.2).
SHORT_CERTIFICATES = "4m"


def renewal_broken(version: str) -> bool:
    return tuple(int(part) for part in version.split(".")[:2]) < (1, 2)


def renewal_shown(version: str) -> bool:
    """Where the renewal runs on short certificates: the last minor whose Liqo does not renew them (the one the
    upgrade starts from); older ones take the same path, each test of it costs its certificates' lifetime."""
    return version in UPGRADED and renewal_broken(version)


@dataclass
class MatrixEnv(RealPair):
    operator: OperatorProcess
    version: str
    namespace: str  # where its LiqoPeerings live, with the provider's kubeconfig in Secret SECRET

    @property
    def chart(self) -> LiqoChartPair:
        return cast(LiqoChartPair, self.pair)

    def diagnostics(self) -> str:
        status = self.peerings.status(self.namespace, NAME)
        tail = "\n".join(self.operator.log().splitlines()[-20:])
        return "\n".join([f"LiqoPeering status: {status}", f"--- operator log:\n{tail}", *self.pair.diagnostics()])


@pytest.fixture(scope="module", params=VERSIONS, ids=lambda v: f"liqo-{v}")
def liqo_matrix_pair(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiqoChartPair]:
    """Liqo's chart of one version of LIQO_MATRIX on two clusters with a node each, every workload available."""
    version: str = request.param
    # Short: a node's unix socket paths must fit 108 bytes.
    base = Path(tempfile.mkdtemp(prefix=f"lm{version.replace('.', '')}-"))
    started = time.monotonic()
    pair = start_chart_pair(base, version, SHORT_CERTIFICATES if renewal_shown(version) else None)
    pair.keep_logs = tmp_path_factory.mktemp(f"liqo-{version}-logs")
    sys.stderr.write(f"\nLiqo v{version}'s chart pair up in {time.monotonic() - started:.1f}s: {pair.timings}\n")
    try:
        yield pair
    finally:
        pair.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def matrix_env(
    liqo_matrix_pair: LiqoChartPair, tmp_path_factory: pytest.TempPathFactory, leak_scan: LeakScan
) -> Iterator[MatrixEnv]:
    """The operator as a process against the consumer, a namespace for the LiqoPeerings; whatever is left of
    them is unpeered at the end."""
    pair = liqo_matrix_pair
    consumer_api, provider_api = api_client(pair["consumer"].kubeconfig), api_client(pair["provider"].kubeconfig)
    install_crd(consumer_api)
    # As the ServiceAccount of the chart installed on the consumer (the pair is this module's alone).
    # Where Liqo does not renew the identities, the operator restarts what read them once (restartLiqoOnRenewal).
    restarts = ("restartLiqoOnRenewal=true",) if renewal_shown(pair.versions["consumer"]) else ()
    chart = chart_rbac.install(pair["consumer"].kubeconfig, LIQO_NAMESPACE, (*chart_rbac.SUITE_VALUES, *restarts))
    operator = chart.operator(tmp_path_factory.mktemp("matrix-operator")).start()
    leak_scan.add_log(operator.log_path)
    env = MatrixEnv(pair, Peerings(consumer_api), consumer_api, provider_api, operator, pair.versions["consumer"], "")
    env.namespace = case_namespace(env, f"matrix-{env.version}")
    try:
        yield env
    finally:
        try:
            leak_scan.collect(env.apis)
            for item in env.peerings.in_namespace(env.namespace):
                env.peerings.delete(env.namespace, item["metadata"]["name"])
                env.peerings.wait_gone(env.namespace, item["metadata"]["name"], timeout=180)
        finally:
            operator.stop()
            sys.stderr.write(f"\n--- operator log: {operator.log_path}\n")


def _bench(capsys: pytest.CaptureFixture[str], env: MatrixEnv, text: str) -> None:
    with capsys.disabled():  # printed in CI's output
        print(f"\nBENCH Liqo v{env.version} (chart): {text}")


def _conditions(env: MatrixEnv) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in env.peerings.status(env.namespace, NAME).get("conditions") or []}


def _connected(env: MatrixEnv) -> dict[str, str] | None:
    """Liqo's Connections on both sides, once its gateways completed a WireGuard handshake."""
    found = {}
    for side, peer in (("consumer", env.provider_id), ("provider", env.consumer_id)):
        conns = items(env.apis[side], "networking.liqo.io", "connections", tenant_ns(env.apis[side], peer))
        found[side] = ",".join(str((c.get("status") or {}).get("value")) for c in conns)
    return found if set(found.values()) == {"Connected"} else None


def _assert_ready_on(env: MatrixEnv, version: str) -> None:
    """Ready with Liqo's own gateways Connected and its virtual Node Ready, `version` shown on both sides, no
    version condition."""
    status = env.peerings.status(env.namespace, NAME)
    conds = _conditions(env)
    for cond_type in ("Ready", "NetworkReady", "AuthenticationReady", "OffloadingReady"):
        assert conds[cond_type]["status"] == "True", status["conditions"]
    assert "LiqoVersionSkew" not in conds and "LiqoVersionUntested" not in conds, status["conditions"]
    for side in ("consumer", "provider"):
        assert status["versions"][side]["liqo"] == f"v{version}", status["versions"]
    wait_for("the Connections on both sides to be Connected", lambda: _connected(env), timeout=60)
    node = env.pair.kube("consumer").get(k.NODE, env.provider_id)
    assert node is not None and node["metadata"]["labels"]["liqo.io/type"] == "virtual-node"
    # Waited for, not read once: on the pair whose certificates last minutes the operator restarts the virtual
    # kubelet at each renewal (restartLiqoOnRenewal), and its Node reports nothing until it is back.
    wait_for(
        f"the virtual Node {env.provider_id} Ready",
        lambda: ready(env.pair.kube("consumer").get(k.NODE, env.provider_id) or {}),
        timeout=120,
    )


def test_a_liqo_peering_becomes_ready_with_real_gateways(
    matrix_env: MatrixEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = matrix_env
    started = time.monotonic()
    env.peerings.create(env.namespace, NAME, env.spec(offloading={"resources": {"cpu": "2", "memory": "4Gi"}}))
    try:
        env.peerings.wait_status(env.namespace, NAME, "ready", timeout=420)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{env.diagnostics()}") from None
    _bench(capsys, env, f"LiqoPeering create -> Ready: {time.monotonic() - started:.1f}s")
    _assert_ready_on(env, env.version)
    assert_one_of_each(env)


def test_a_pod_is_offloaded_to_the_providers_node(matrix_env: MatrixEnv) -> None:
    env = matrix_env
    consumer, provider = env.pair.kube("consumer"), env.pair.kube("provider")
    offload_a_pod(consumer, provider, env.provider_id, "matrix-offloaded", env.diagnostics)


def test_identity_certificates_are_renewed_before_they_expire(
    matrix_env: MatrixEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    """Liqo before v1.2 hands out the certificate it stored again when asked to renew: with this pair's short
    certificates the peering would break at their expiry. The operator has them issued again once due, in both
    directions of a bidirectional peering: Ready throughout, past the expiry of the certificates it started with,
    the ControlPlane and the ResourceSlice identities of each direction on new ones; a Pod offloaded each way
    before still runs, and one offloaded after (the virtual kubelet reflecting it with its identity) comes up too.
    The reverse direction is turned off at the end, as the module's other tests expect."""
    env = matrix_env
    if not renewal_shown(env.version):
        pytest.skip(
            f"the renewal is checked on {', '.join(f'v{v}' for v in UPGRADED) or 'no version'}, the last minor whose"
            f" Liqo does not renew, not v{env.version}"
        )
    consumer, provider = env.pair.kube("consumer"), env.pair.kube("provider")
    started = time.monotonic()
    reverse = {"offloading": {"resources": {"cpu": "1", "memory": "1Gi"}}}
    _reconciled(env, {"spec": {"bidirectional": True, "reverse": reverse}}, "both directions Ready")

    def certificates() -> dict[tuple[str, str], dict[str, Any]]:
        found = env.peerings.status(env.namespace, NAME).get("certificates") or []
        return {(c["heldBy"], c["type"]): c for c in found}

    back = env.diagnostics
    with (
        offloaded_pods(consumer, provider, env.provider_id, "matrix-renewal", back) as pods,
        offloaded_pods(provider, consumer, env.consumer_id, "matrix-renewal-back", back) as pods_back,
    ):
        ((before, _),) = pods.running()
        ((before_back, _),) = pods_back.running()
        first = wait_for(
            "both directions' identities in status.certificates",
            lambda: found if len(found := certificates()) == 4 else None,
        )
        expiry = max(datetime.fromisoformat(c["notAfter"].replace("Z", "+00:00")) for c in first.values())
        # Past the expiry by the virtual node's lease (40 s): a virtual kubelet on an expired identity would be
        # NotReady by then.
        not_ready: list[str] = []
        while datetime.now(UTC) < expiry + timedelta(seconds=60):
            ready_cond = _conditions(env).get("Ready") or {}
            if ready_cond.get("status") != "True":
                not_ready.append(
                    f"{datetime.now(UTC):%H:%M:%S} {ready_cond.get('reason')}: {ready_cond.get('message')}"
                )
            time.sleep(2)
        assert not not_ready, "\n".join(not_ready) + "\n" + env.diagnostics()
        now = certificates()
        for key in first:
            assert now[key]["notAfter"] > first[key]["notAfter"], (key, first[key], now[key])
        valid = _conditions(env)["CertificatesValid"]
        assert (valid["status"], valid["reason"]) == ("True", "CertificatesValid"), valid
        for offloaded, was in ((pods, before), (pods_back, before_back)):
            ((after, _),) = offloaded.running()
            assert after["metadata"]["uid"] == was["metadata"]["uid"]  # the same Pod, still running
            offloaded.scale(2)
            offloaded.running(2)
    _reconciled(env, {"spec": {"bidirectional": False}}, "the reverse direction removed")
    _bench(capsys, env, f"identities renewed past their first certificates' expiry: {time.monotonic() - started:.0f}s")


def _reconciled(env: MatrixEnv, patch: dict[str, Any], what: str) -> None:
    """``patch`` applied to the peering, then waited for: its generation observed and the peering Ready."""
    try:
        env.peerings.change_and_wait_ready(env.namespace, NAME, patch)
    except AssertionError as exc:
        raise AssertionError(f"{what}: {exc}\n{env.diagnostics()}") from None


def test_a_spec_change_is_applied(matrix_env: MatrixEnv) -> None:
    """spec.offloading.resources changed: the consumer's ResourceSlice carries them, Liqo replicates it to the
    provider, the virtual Node offers them, observedGeneration follows and the peering is Ready."""
    env, resources = matrix_env, {"cpu": "3", "memory": "6Gi"}
    env.peerings.patch(env.namespace, NAME, {"spec": {"offloading": {"resources": resources}}})
    c_ns, p_ns = tenant_ns(env.consumer_api, env.provider_id), tenant_ns(env.provider_api, env.consumer_id)

    def carried(side: str, ns: str) -> bool:
        rs = get(env.apis[side], "authentication.liqo.io", "resourceslices", ns, env.provider_id) or {}
        return (rs.get("spec") or {}).get("resources") == resources

    wait_for("the consumer's ResourceSlice to carry the new resources", lambda: carried("consumer", c_ns), 60)
    wait_for("Liqo to replicate it to the provider", lambda: carried("provider", p_ns), 60)

    def offered() -> bool:
        node = env.pair.kube("consumer").get(k.NODE, env.provider_id) or {}
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        return all(allocatable.get(name) == value for name, value in resources.items())

    wait_for("the virtual Node to offer the new resources", offered, 120)
    generation = env.peerings.get(env.namespace, NAME)["metadata"]["generation"]  # type: ignore[index]
    wait_for(
        "observedGeneration to follow",
        lambda: env.peerings.status(env.namespace, NAME).get("observedGeneration") == generation,
    )
    env.peerings.wait_status(env.namespace, NAME, "ready", timeout=120)


def test_unpeering_leaves_nothing_on_either_cluster(matrix_env: MatrixEnv, capsys: pytest.CaptureFixture[str]) -> None:
    took = unpeer(matrix_env, matrix_env.namespace, NAME)
    _bench(capsys, matrix_env, f"LiqoPeering delete -> gone: {took:.1f}s")
    wait_liqo_done(matrix_env)
    assert matrix_env.pair.kube("consumer").list(k.NODE, selector="liqo.io/type=virtual-node") == []


def test_a_liqoctl_peering_of_the_same_version_is_adopted(
    matrix_env: MatrixEnv, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`liqoctl peer` of this Liqo version, then a LiqoPeering for the same provider: it adopts liqoctl's
    objects (none re-created or duplicated) and turns Ready."""
    env = matrix_env
    args = ["--kubeconfig", str(env.pair["consumer"].kubeconfig)]
    args += ["--remote-kubeconfig", str(env.pair["provider"].kubeconfig), *env.pair.liqoctl_peer_args]
    liqoctl = liqo_binary("liqoctl", env.version)
    version = subprocess.run([str(liqoctl), "version", "--client"], capture_output=True, text=True, timeout=30)
    assert f"v{env.version}" in version.stdout, version.stdout
    started = time.monotonic()
    peer = subprocess.run(
        [str(liqoctl), "peer", *args, "--timeout", "5m"],
        capture_output=True,
        text=True,
        timeout=360,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    took = time.monotonic() - started
    assert peer.returncode == 0, f"liqoctl peer failed:\n{peer.stdout[-4000:]}\n{peer.stderr[-4000:]}"
    _bench(capsys, env, f"liqoctl peer -> done: {took:.1f}s")

    before = wait_for("every object of liqoctl's peering", lambda: every_object_uids(env), timeout=120)
    env.peerings.create(env.namespace, NAME, env.spec())
    try:
        env.peerings.wait_status(env.namespace, NAME, "ready", timeout=180)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{env.diagnostics()}") from None
    assert object_uids(env) == before, "objects were re-created while adopting the liqoctl peering"
    assert_one_of_each(env)
    _assert_ready_on(env, env.version)


def test_liqo_upgraded_under_a_live_peering(
    matrix_env: MatrixEnv, tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    """`helm upgrade` of Liqo to TARGET's chart, the provider first then the consumer, as Liqo's docs say.
    Between the two the versions differ: the live peering shows LiqoVersionSkew (AppearedWhileReady) and
    carries on, while a new peering between the two versions is refused with it. Afterwards the peering is
    Ready by itself on TARGET, none of its objects re-created."""
    env = matrix_env
    if env.version not in UPGRADED:
        pytest.skip(f"the upgrade is checked from v{TARGET}'s previous minor version, not v{env.version}")
    target_images = liqo_images(TARGET)
    uids = object_uids(env)
    peering_uid = env.peerings.get(env.namespace, NAME)["metadata"]["uid"]  # type: ignore[index]
    env.chart.load(target_images)  # into both nodes at once; pulled from a registry in a real cluster
    _bench(capsys, env, f"v{TARGET}'s images loaded into both nodes: {env.chart.timings['images loaded again']:.1f}s")

    env.chart.upgrade("provider", TARGET, target_images)
    _bench(capsys, env, f"helm upgrade of the provider to v{TARGET}: {env.chart.timings['upgrade provider']:.1f}s")

    def skew_while_ready() -> dict[str, Any] | None:
        conds = _conditions(env)
        skew = conds.get("LiqoVersionSkew")
        return skew if skew and conds.get("Ready", {}).get("status") == "True" else None

    try:
        skew = wait_for("LiqoVersionSkew on the live peering, Ready", skew_while_ready, timeout=240)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{env.diagnostics()}") from None
    assert (skew["status"], skew["reason"]) == ("True", "AppearedWhileReady"), skew
    assert f"consumer v{env.version}, provider v{TARGET}" in skew["message"], skew["message"]
    versions = env.peerings.status(env.namespace, NAME)["versions"]
    assert (versions["consumer"]["liqo"], versions["provider"]["liqo"]) == (f"v{env.version}", f"v{TARGET}")
    _refused_while_skewed(env, tmp_path_factory.mktemp("reverse-operator"))

    env.chart.upgrade("consumer", TARGET, target_images)
    _bench(capsys, env, f"helm upgrade of the consumer to v{TARGET}: {env.chart.timings['upgrade consumer']:.1f}s")

    def settled() -> bool:
        # Liqo keeps reconciling after its own workloads are rolled out: the new controller re-creates the
        # gateways from its template and accepts the Configuration again, and the peering says so on the way
        # (GatewayUnreachable, WaitingForConfiguration). Every check is made on one read, once all hold.
        try:
            _assert_ready_on(env, TARGET)
        except AssertionError:
            return False
        return True

    try:
        wait_for(f"the peering Ready on v{TARGET} on both sides, without the skew", settled, timeout=300)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{env.diagnostics()}") from None
    assert object_uids(env) == uids, "objects of the peering were re-created across the upgrade"
    assert env.peerings.get(env.namespace, NAME)["metadata"]["uid"] == peering_uid  # type: ignore[index]
    assert_one_of_each(env)


def _refused_while_skewed(env: MatrixEnv, log_dir: Path) -> None:
    """A new peering between the two versions: the provider (upgraded) peering with the consumer, by an
    operator there. It is refused with LiqoVersionSkew before it makes anything, and goes when deleted."""
    provider_api = env.provider_api
    install_crd(provider_api)
    reverse = Peerings(provider_api)
    # That operator too has the rights of the chart, installed on the provider for it.
    chart = chart_rbac.install(env.pair["provider"].kubeconfig, LIQO_NAMESPACE)
    operator = chart.operator(log_dir).start()
    namespace = "matrix-reverse"
    try:
        reverse.make_namespace(namespace)
        reverse.put_kubeconfig_secret(namespace, SECRET, Path(env.pair["consumer"].kubeconfig).read_bytes())
        reverse.create(namespace, NAME, env.spec())
        ready_cond = reverse.wait_reason(namespace, NAME, "LiqoVersionSkew", timeout=120)
        assert ready_cond["status"] == "False", ready_cond
        assert f"consumer v{TARGET}, provider v{env.version}" in ready_cond["message"], ready_cond["message"]
        skew = reverse.condition(namespace, NAME, "LiqoVersionSkew")
        assert skew is not None and (skew["status"], skew["reason"]) == ("True", "Refused"), skew
        assert reverse.status(namespace, NAME)["stage"] == "discovery: error"
        reverse.delete(namespace, NAME)
        reverse.wait_gone(namespace, NAME)
    finally:
        operator.stop()
        reverse.core.delete_namespace(namespace)
        chart.uninstall()


def test_the_last_peering_unpeers_leaving_nothing(matrix_env: MatrixEnv) -> None:
    unpeer(matrix_env, matrix_env.namespace, NAME)
    wait_liqo_done(matrix_env)
