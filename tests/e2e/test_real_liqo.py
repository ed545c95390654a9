"""The operator against Liqo itself, not a stand-in: marker `realliqo`.

The pair (`real_liqo`, testenv.liqo_install) is Liqo v1.2.0 as users install it by default: `helm install
liqo` of its own chart on two clusters with a real node each, its images built here, its gateways real Pods
with userspace WireGuard, kube-scheduler and kubelets real (testenv.liqo_chart). With
LIQO_INSTALL=processes it is the faster tier: Liqo's liqo-controller-manager, crd-replicator, ipam and (per
VirtualNode) virtual-kubelet as processes on clusters without nodes, the data plane (gateway pods,
LoadBalancer address, Connections) stood in (liqo_real.dataplane). Either way ForeignClusters, nonces,
Tenants/Identities (real CSRs), ResourceSlice acceptance, VirtualNodes and the virtual Node come from Liqo.

The adoption test comes first on purpose: it peers the shared pair with liqoctl, and unpeers it by deleting
the LiqoPeering that adopted that peering, before any other test peers it.
"""

from __future__ import annotations

import base64
import contextlib
import ipaddress
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
import urllib3
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

import doc_blocks
from testenv import audit, chart_rbac, inventory, liqo_info, operator_support, real_pair
from testenv.killpoints import POINTS, Counts, Cycle
from testenv.leakscan import LeakScan
from testenv.liqo_install import LiqoInstall, install_kind
from testenv.liqo_real import liqo_binary
from testenv.operator_support import (
    SECRET,
    OperatorProcess,
    Peerings,
    api_client,
    custom,
    get,
    install_crd,
    items,
    operator_writes,
    provider_down,
    provider_hung,
    tarpit_kubeconfig,
    tenant_ns,
    wait_for,
)
from testenv.reactions import OPERATOR_AGENT, SIGNED_NONCE_SECRET, by_timer, passes, peering_steps, reactions
from testenv.real_pair import (
    SIDES,
    RealPair,
    assert_one_of_each,
    case_namespace,
    every_object_uids,
    liqos_own,
    object_uids,
    unpeer,
    wait_liqo_done,
)
from testenv.rotation import Rotation
from testenv.wait import wait_progressing

pytestmark = [pytest.mark.realliqo]

NAME = "provider"
VIRTUAL_NODE_TAINT = "virtual-node.liqo.io/not-allowed"  # pkg/consts (the webhook would add the toleration)
REPLICATED = "liqo.io/replicated"  # pkg/consts: made on this cluster by Liqo's CRD replicator
LIQO_NAMESPACE = "liqo"  # where either install puts Liqo (testenv.liqo_chart, testenv.liqo_real)


@dataclass
class RealEnv(RealPair):
    operator: OperatorProcess
    gone: set[str] = field(default_factory=set)  # sides destroyed for good: their side of a peering stays

    def diagnostics(self) -> str:
        return "\n".join([f"operator log: {self.operator.log_path}", *self.pair.diagnostics()])


def _start_env(pair: LiqoInstall, chart: chart_rbac.ChartRelease, log_dir: Path) -> RealEnv:
    consumer_api = api_client(pair["consumer"].kubeconfig)
    install_crd(consumer_api)
    # The production resync (60 s), not the 5 s of the stand-in suites; at debug level, each pass logs what woke
    # it, so that a step that waited for a resync instead of its event stands out
    # (test_each_step_follows_its_prerequisite).
    operator = chart.operator(log_dir, ["--resync-interval", "60", "--log-level", "debug"]).start()
    provider_api = api_client(pair["provider"].kubeconfig)
    return RealEnv(pair, Peerings(consumer_api), consumer_api, provider_api, operator)


@pytest.fixture(scope="module")
def real_env(
    real_liqo: LiqoInstall, tmp_path_factory: pytest.TempPathFactory, leak_scan: LeakScan
) -> Iterator[RealEnv]:
    # The operator as the ServiceAccount of the chart installed on the consumer; uninstalled afterwards, as
    # other modules of the tier install it (or their own release) on the same pair.
    chart = chart_rbac.install(real_liqo["consumer"].kubeconfig, LIQO_NAMESPACE)
    env = _start_env(real_liqo, chart, tmp_path_factory.mktemp("real-operator"))
    leak_scan.add_log(env.operator.log_path)
    try:
        yield env
    finally:
        env.operator.stop()
        sys.stderr.write(f"\n--- operator log: {env.operator.log_path}\n")
        chart.uninstall()


def _cleanup(env: RealEnv, namespace: str) -> None:
    env.set_connection_fault(None)
    if not env.operator.running():
        # Still reported at the end of the test's teardown (testenv.crashwatch keeps the exited run until then):
        # this start repairs nothing silently.
        env.operator.start()
    for item in env.peerings.in_namespace(namespace):
        env.peerings.delete(namespace, item["metadata"]["name"])
        env.peerings.wait_gone(namespace, item["metadata"]["name"], timeout=180)
    env.peerings.core.delete_namespace(namespace)
    wait_liqo_done(env, tuple(side for side in SIDES if side not in env.gone))


@pytest.fixture
def rcase(real_env: RealEnv, leak_scan: LeakScan, request: pytest.FixtureRequest) -> Iterator[tuple[RealEnv, str]]:
    """A namespace with Secret provider-kubeconfig; its peerings are unpeered afterwards."""
    namespace = case_namespace(real_env, request.node.name)
    try:
        yield real_env, namespace
    finally:
        sys.stderr.write(real_env.diagnostics() + "\n")  # shown by pytest when the test failed
        leak_scan.collect({"consumer": real_env.consumer_api, "provider": real_env.provider_api})
        _cleanup(real_env, namespace)


def _generations(env: RealEnv, namespace: str) -> dict[str, int]:
    """metadata.generation of the LiqoPeering and of every Liqo object in both tenant namespaces."""
    c_ns, p_ns = tenant_ns(env.consumer_api, env.provider_id), tenant_ns(env.provider_api, env.consumer_id)
    kinds = [
        ("networking.liqo.io", "configurations"),
        ("networking.liqo.io", "gatewayservers"),
        ("networking.liqo.io", "gatewayclients"),
        ("networking.liqo.io", "publickeies"),
        ("authentication.liqo.io", "tenants"),
        ("authentication.liqo.io", "identities"),
        ("authentication.liqo.io", "resourceslices"),
        ("offloading.liqo.io", "virtualnodes"),
    ]
    found = {f"liqopeering/{namespace}/{NAME}": int(env.peerings.get(namespace, NAME)["metadata"]["generation"])}  # type: ignore[index]
    for side, api, ns in (("consumer", env.consumer_api, c_ns), ("provider", env.provider_api, p_ns)):
        for group, plural in kinds:
            for obj in items(api, group, plural, ns):
                found[f"{side}/{plural}/{obj['metadata']['name']}"] = int(obj["metadata"].get("generation") or 0)
    assert any(key.startswith("consumer/resourceslices/") for key in found), found
    return found


def _seconds_between(start: str, end: str) -> float:
    """Seconds between two RFC 3339 timestamps such as status.startedAt and status.readyAt."""
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


# --- adoption of a liqoctl peering (first: the shared pair is not peered yet) --------------------------------
def test_liqoctl_peering_is_adopted_without_disruption(
    rcase: tuple[RealEnv, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`liqoctl peer`, then a LiqoPeering for the same provider: it adopts liqoctl's objects (none is
    re-created or duplicated) and turns Ready; deleting it unpeers (rcase's cleanup, and the next tests,
    which peer the same pair again, would fail on anything left)."""
    env, namespace = rcase
    args = ["--kubeconfig", str(env.pair["consumer"].kubeconfig)]
    args += ["--remote-kubeconfig", str(env.pair["provider"].kubeconfig), *env.pair.liqoctl_peer_args]
    started = time.monotonic()
    peer = subprocess.run(
        [str(liqo_binary("liqoctl")), "peer", *args, "--timeout", "5m"],
        capture_output=True,
        text=True,
        timeout=360,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    took = time.monotonic() - started
    sys.stderr.write(f"\nliqoctl peer took {took:.1f}s (rc {peer.returncode})\n{peer.stdout[-3000:]}\n")
    assert peer.returncode == 0, f"liqoctl peer failed:\n{peer.stdout[-4000:]}\n{peer.stderr[-4000:]}"
    with capsys.disabled():  # printed in CI's output
        print(f"\nBENCH real Liqo ({install_kind()}): liqoctl peer -> done: {took:.1f}s")

    try:
        before = wait_for("every object of liqoctl's peering", lambda: every_object_uids(env), timeout=120)
    except AssertionError:
        # Adopted all the same, so that rcase's cleanup unpeers liqoctl's peering: the next tests need the
        # pair unpeered.
        env.peerings.create(namespace, NAME, env.spec())
        raise
    env.peerings.create(namespace, NAME, env.spec())
    status = env.peerings.wait_status(namespace, NAME, "ready", timeout=180)
    after = object_uids(env)
    assert after == before, "objects were re-created while adopting the liqoctl peering"
    assert status["remoteClusterID"] == env.provider_id
    # Still one of each (no duplicate next to liqoctl's).
    c_ns = tenant_ns(env.consumer_api, env.provider_id)
    for plural, group in (("resourceslices", "authentication.liqo.io"), ("gatewayclients", "networking.liqo.io")):
        assert len(items(env.consumer_api, group, plural, c_ns)) == 1, plural


# --- one peering shared by the read-only and in-place tests ------------------------------------------------
@pytest.fixture(scope="class")
def peered(real_env: RealEnv, leak_scan: LeakScan) -> Iterator[tuple[RealEnv, str]]:
    namespace = case_namespace(real_env, "shared")
    try:
        offloading = {"resources": {"cpu": "2", "memory": "4Gi"}}
        real_env.peerings.create(namespace, NAME, real_env.spec(offloading=offloading))
        try:
            real_env.peerings.wait_status(namespace, NAME, "ready", timeout=240)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{real_env.diagnostics()}") from None
        status = real_env.peerings.status(namespace, NAME)
        sys.stderr.write(f"\noperator peering: startedAt {status['startedAt']} readyAt {status['readyAt']}\n")
        yield real_env, namespace
    finally:
        leak_scan.collect({"consumer": real_env.consumer_api, "provider": real_env.provider_api})
        _cleanup(real_env, namespace)


class TestPeeredWithRealLiqo:
    def test_ready_and_status_mirrors_liqos_foreign_cluster(
        self, peered: tuple[RealEnv, str], capsys: pytest.CaptureFixture[str]
    ) -> None:
        env, ns = peered
        status = env.peerings.status(ns, NAME)
        took = _seconds_between(status["startedAt"], status["readyAt"])
        with capsys.disabled():  # startedAt/readyAt have one-second resolution
            print(f"\nBENCH real Liqo ({install_kind()}): LiqoPeering create -> Ready: {took:.0f}s (+-1s)")
        assert status["peerStatus"] == "ready"
        assert status["localClusterID"] == env.consumer_id and status["remoteClusterID"] == env.provider_id
        conds = {c["type"]: c for c in status["conditions"]}
        for cond_type in ("Ready", "NetworkReady", "AuthenticationReady", "OffloadingReady"):
            assert conds[cond_type]["status"] == "True", conds[cond_type]

        def view(status: dict[str, Any]) -> dict[str, Any]:
            """Role and, per module, enabled and (type, status) pairs: as Liqo wrote them, or as mirrored."""
            mods = status.get("modules") or {}
            return {
                "role": status.get("role"),
                "modules": {
                    m: {
                        "enabled": bool((mods.get(m) or {}).get("enabled")),
                        "conditions": sorted(
                            (c["type"], c.get("status")) for c in (mods.get(m) or {}).get("conditions") or []
                        ),
                    }
                    for m in ("networking", "authentication", "offloading")
                },
            }

        def liqo_view() -> dict[str, Any]:
            fc = get(env.consumer_api, "core.liqo.io", "foreignclusters", None, env.provider_id) or {}
            return view(fc.get("status") or {})

        def mirror_view() -> dict[str, Any]:
            return view(env.peerings.status(ns, NAME).get("foreignCluster") or {})

        # Ready came from Liqo's earliest signals (the Connection, the Identity, the virtual Node); Liqo's
        # ForeignCluster aggregate catches up when its controller next wakes (the virtual kubelet's Node
        # status push, every 60 s).
        healthy = {"networking": "Healthy", "authentication": "Healthy", "offloading": "Healthy"}

        def mirrored_health() -> dict[str, str]:
            mods = (env.peerings.status(ns, NAME).get("foreignCluster") or {}).get("modules") or {}
            return {m: (mods.get(m) or {}).get("health", "") for m in healthy}

        wait_for("the mirror to show every Liqo module Healthy", lambda: mirrored_health() == healthy, timeout=150)
        liqo = liqo_view()
        # Liqo itself wrote these (the ForeignCluster controller): every module enabled, with conditions.
        for m in ("networking", "authentication", "offloading"):
            assert liqo["modules"][m]["enabled"] and liqo["modules"][m]["conditions"], (m, liqo)
        wait_for(
            "the LiqoPeering's foreignCluster mirror to equal Liqo's ForeignCluster status",
            lambda: mirror_view() == liqo_view(),
            timeout=30,
        )
        mirror = env.peerings.status(ns, NAME)["foreignCluster"]
        assert {m: mirror["modules"][m]["health"] for m in ("networking", "authentication", "offloading")} == {
            "networking": "Healthy",
            "authentication": "Healthy",
            "offloading": "Healthy",
        }, mirror

    def test_each_step_follows_its_prerequisite(
        self, peered: tuple[RealEnv, str], capsys: pytest.CaptureFixture[str]
    ) -> None:
        """From the API servers' audit logs: every step of the peering is written after the last write (by Liqo)
        of what it waits for, in order, each by a pass that a watch event woke (the operator's debug log), not
        by the resync that repairs a lost wake-up. The reaction times are printed as BENCH lines, not asserted:
        how soon is make bench's question."""
        env, ns = peered
        created = datetime.fromisoformat(env.peerings.get(ns, NAME)["metadata"]["creationTimestamp"])  # type: ignore[index]
        events = {side: audit.writes(env.pair[side].audit_log, since=created) for side in ("consumer", "provider")}
        steps = peering_steps(env.consumer_id, env.provider_id)
        # Liqo keeps the nonce and its signature in the tenant namespaces after unpeering (as `liqoctl unpeer`
        # leaves them), and a later peering of the pair reuses them: their two steps happen only on the
        # pair's first peering (here, the liqochart tests or the adoption test came first).
        signed = k8s.CoreV1Api(env.consumer_api).read_namespaced_secret(
            SIGNED_NONCE_SECRET, tenant_ns(env.consumer_api, env.provider_id)
        )
        if signed.metadata.creation_timestamp < created:  # type: ignore[union-attr,operator]
            steps = [s for s in steps if s.after[0].name != SIGNED_NONCE_SECRET and s.write.name != SIGNED_NONCE_SECRET]
        found = reactions(events, steps)
        with capsys.disabled():
            for r in found:
                print(f"\nBENCH real Liqo reaction: {r.step}: {r.seconds * 1000:.0f} ms")
        assert [r.step for r in found] == [s.name for s in steps]  # every step seen, in this order
        log_lines = env.operator.log_path.read_text(errors="replace").splitlines()
        this_peering = [p for p in passes(log_lines, f"LiqoPeering {ns}/{NAME}") if p.began >= created]
        late = by_timer(found, this_peering)
        assert not late, late

    def test_quiet_at_rest(self, peered: tuple[RealEnv, str]) -> None:
        """Once Ready (and Liqo's aggregate caught up), 60 s without a single write by the operator on
        either cluster and without a generation change on any object of the peering."""
        env, ns = peered
        healthy = {"networking": "Healthy", "authentication": "Healthy", "offloading": "Healthy"}

        def settled() -> bool:
            mods = (env.peerings.status(ns, NAME).get("foreignCluster") or {}).get("modules") or {}
            return {m: (mods.get(m) or {}).get("health") for m in healthy} == healthy

        wait_for("Liqo's ForeignCluster to catch up (so the mirror has nothing left to write)", settled, timeout=150)
        before = _generations(env, ns)
        start = datetime.now(UTC)
        time.sleep(60)  # the observation window, long enough to hold the virtual kubelet's 60 s Node update
        ours = {
            side: [
                (e.verb, e.resource, e.name)
                for e in audit.writes(env.pair[side].audit_log, since=start, user_agent_prefix=OPERATOR_AGENT)
            ]
            for side in ("consumer", "provider")
        }
        assert ours == {"consumer": [], "provider": []}
        assert _generations(env, ns) == before

    def test_liqo_did_the_work_itself(self, peered: tuple[RealEnv, str]) -> None:
        """What the stand-in would have faked is here, written by Liqo's controllers."""
        env, _ = peered
        c_ns, p_ns = tenant_ns(env.consumer_api, env.provider_id), tenant_ns(env.provider_api, env.consumer_id)
        core_c, core_p = k8s.CoreV1Api(env.consumer_api), k8s.CoreV1Api(env.provider_api)
        # The Tenant's certificate was issued through a real CSR, signed by the provider's CA.
        identity = get(
            env.consumer_api, "authentication.liqo.io", "identities", c_ns, f"controlplane-{env.provider_id}"
        )
        assert identity and identity["status"]["kubeconfigSecretRef"]["name"]
        secret = core_c.read_namespaced_secret(identity["status"]["kubeconfigSecretRef"]["name"], c_ns)
        kubeconfig = base64.b64decode((secret.data or {})["kubeconfig"]).decode()
        assert env.pair["provider"].server in kubeconfig
        # ResourceSlice accepted by the provider's controller manager, replicated by the CRD replicator.
        rs = get(env.consumer_api, "authentication.liqo.io", "resourceslices", c_ns, env.provider_id)
        assert rs
        rs_conds = {c["type"]: c["status"] for c in rs["status"]["conditions"]}
        assert rs_conds.get("Authentication") == "Accepted" and rs_conds.get("Resources") == "Accepted", rs_conds
        assert get(env.provider_api, "authentication.liqo.io", "resourceslices", p_ns, env.provider_id)
        # The virtual Node, registered by the real virtual kubelet (a Pod, or a process on the faster tier).
        nodes = core_c.list_node(label_selector="liqo.io/type=virtual-node").items
        assert [n.metadata.name for n in nodes] == [env.provider_id]  # type: ignore[union-attr]
        ready = {c.type: c.status for c in (nodes[0].status.conditions or [])}  # type: ignore[union-attr]
        assert ready.get("Ready") == "True", ready
        assert env.pair.virtual_kubelets() == 1
        # The nonce Secret on the provider was filled by Liqo's nonce creator.
        nonces = core_p.list_namespaced_secret(p_ns, label_selector="liqo.io/nonce=true").items
        assert len(nonces) == 1 and (nonces[0].data or {}).get("nonce")

    def test_status_shows_when_each_identitys_certificate_expires(self, peered: tuple[RealEnv, str]) -> None:
        """status.certificates holds the validity of the certificates the provider's Liqo issued through real
        CSRs (the ControlPlane Identity's and the ResourceSlice's), and CertificatesValid says they hold."""
        env, ns = peered
        c_ns = tenant_ns(env.consumer_api, env.provider_id)
        identity = get(
            env.consumer_api, "authentication.liqo.io", "identities", c_ns, f"controlplane-{env.provider_id}"
        )
        rs = get(env.consumer_api, "authentication.liqo.io", "resourceslices", c_ns, env.provider_id)
        assert identity and rs

        def validity(auth_params: dict[str, Any]) -> tuple[str, str]:
            cert = x509.load_pem_x509_certificate(base64.b64decode(auth_params["signedCRT"]))
            return tuple(  # type: ignore[return-value]
                t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                for t in (cert.not_valid_before_utc, cert.not_valid_after_utc)
            )

        status = env.peerings.status(ns, NAME)
        shown = {(c["type"], c.get("resourceSlice")): c for c in status["certificates"]}
        assert set(shown) == {("ControlPlane", None), ("ResourceSlice", env.provider_id)}, status["certificates"]
        for key, params in (
            (("ControlPlane", None), identity["spec"]["authParams"]),
            (("ResourceSlice", env.provider_id), rs["status"]["authParams"]),
        ):
            assert (shown[key]["notBefore"], shown[key]["notAfter"]) == validity(params), shown[key]
            assert (
                shown[key]["heldBy"] == "consumer"
                and shown[key]["notBefore"] < shown[key]["renewAt"] < shown[key]["notAfter"]
            )
        valid = next(c for c in status["conditions"] if c["type"] == "CertificatesValid")
        assert (valid["status"], valid["reason"]) == ("True", "CertificatesValid"), valid

    def test_status_shows_what_liqoctl_info_peer_shows(self, peered: tuple[RealEnv, str]) -> None:
        """The status answers what `liqoctl info peer` answers, as Liqo's own objects on both clusters say it:
        the CIDRs and their remaps, the gateway endpoint, the slice's granted resources, the virtual node's
        readiness and the API server address."""
        env, ns = peered
        c_ns, p_ns = tenant_ns(env.consumer_api, env.provider_id), tenant_ns(env.provider_api, env.consumer_id)
        wait_for(
            "the LiqoPeering's status to show what Liqo's objects on both clusters say",
            lambda: (
                liqo_info.from_status(env.peerings.status(ns, NAME))
                == liqo_info.from_liqo(env.consumer_api, env.provider_api, env.consumer_id, env.provider_id)
            ),
            timeout=60,
        )
        status = env.peerings.status(ns, NAME)
        # Networking: each side's Configuration, written by the operator, remapped by Liqo's IPAM.
        c_conf = get(env.consumer_api, "networking.liqo.io", "configurations", c_ns, env.provider_id) or {}
        assert status["network"]["provider"]["podCIDRs"] == c_conf["spec"]["remote"]["cidr"]["pod"]
        assert status["network"]["provider"]["remappedPodCIDRs"] == c_conf["status"]["remote"]["cidr"]["pod"]
        p_conf = get(env.provider_api, "networking.liqo.io", "configurations", p_ns, env.consumer_id) or {}
        assert status["network"]["consumer"]["externalCIDRs"] == p_conf["spec"]["remote"]["cidr"]["external"]
        # The gateway: the endpoint Liqo's gateway server published on the provider, which the client dials.
        server = get(env.provider_api, "networking.liqo.io", "gatewayservers", p_ns, env.consumer_id) or {}
        published = server["status"]["endpoint"]
        assert status["gateway"]["server"] == "Provider"
        shown_gateway = (status["gateway"]["addresses"], status["gateway"]["port"])
        assert shown_gateway == (published["addresses"], published["port"])
        # The slice: what the spec asked for, what the provider's Liqo granted, with its reasons.
        (shown,) = status["resourceSlices"]
        assert (shown["name"], shown["action"], shown["accepted"]) == (env.provider_id, "Consuming", True)
        assert shown["requested"] == {"cpu": "2", "memory": "4Gi"}
        assert {"cpu": "2", "memory": "4Gi"}.items() <= shown["granted"].items(), shown
        assert {c["reason"] for c in shown["conditions"]} == {
            "ResourceSliceAuthenticationAccepted",
            "ResourceSliceResourcesAccepted",
        }
        assert [(v["name"], v["ready"]) for v in status["virtualNodes"]] == [(env.provider_id, True)]
        # The API server address of the ControlPlane Identity: the provider's own.
        identity = get(
            env.consumer_api, "authentication.liqo.io", "identities", c_ns, f"controlplane-{env.provider_id}"
        )
        assert identity and status["apiServer"]["address"] == identity["spec"]["authParams"]["apiServer"]
        assert env.pair["provider"].server in status["apiServer"]["address"]

    def test_namespace_offloading_and_pod_reflection(self, peered: tuple[RealEnv, str]) -> None:
        env, _ = peered
        ns = "rl-offloaded"
        core_c, core_p = k8s.CoreV1Api(env.consumer_api), k8s.CoreV1Api(env.provider_api)
        env.peerings.make_namespace(ns)
        try:
            custom(env.consumer_api).create_namespaced_custom_object(
                "offloading.liqo.io",
                "v1beta1",
                ns,
                "namespaceoffloadings",
                {
                    "apiVersion": "offloading.liqo.io/v1beta1",
                    "kind": "NamespaceOffloading",
                    "metadata": {"name": "offloading"},
                    "spec": {
                        "namespaceMappingStrategy": "DefaultName",
                        "podOffloadingStrategy": "LocalAndRemote",
                        "clusterSelector": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "liqo.io/type", "operator": "In", "values": ["virtual-node"]}
                                    ]
                                }
                            ]
                        },
                    },
                },
            )

            def offloaded() -> str | None:
                no = get(env.consumer_api, "offloading.liqo.io", "namespaceoffloadings", ns, "offloading") or {}
                st = no.get("status") or {}
                return st.get("remoteNamespaceName") if st.get("offloadingPhase") == "Ready" else None

            remote_ns = wait_for("the NamespaceOffloading to be Ready", offloaded, timeout=90)
            wait_for(
                f"namespace {remote_ns} on the provider",
                lambda: any(n.metadata.name == remote_ns for n in core_p.list_namespace().items),  # type: ignore[union-attr]
                timeout=60,
            )

            # Bind the pod to the virtual node as a scheduler would (Binding subresource), with the toleration
            # Liqo's webhook would add: no kube-scheduler runs on the faster tier, and where one does
            # (tests/e2e/test_liqo_chart.py lets it place a Deployment's Pod), it leaves alone a Pod that
            # names another scheduler.
            pod: Any = {
                "metadata": {"name": "hello"},
                "spec": {
                    "schedulerName": "e2e-binds-it-itself",
                    "containers": [{"name": "hello", "image": "registry.invalid/hello:1"}],
                    "tolerations": [{"key": VIRTUAL_NODE_TAINT, "operator": "Exists", "effect": "NoExecute"}],
                },
            }
            core_c.create_namespaced_pod(ns, pod)
            binding: Any = {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": "hello"},
                "target": {"apiVersion": "v1", "kind": "Node", "name": env.provider_id},
            }
            core_c.create_namespaced_binding(ns, binding, _preload_content=False)
            bound = core_c.read_namespaced_pod("hello", ns)
            assert bound.spec.node_name == env.provider_id  # type: ignore[union-attr]

            def reflected() -> Any:
                pods = core_p.list_namespaced_pod(remote_ns).items
                return pods[0] if pods else None

            remote = wait_for("the virtual kubelet to reflect the pod to the provider", reflected, timeout=90)
            assert remote.metadata.name == "hello"
            assert remote.spec.containers[0].image == "registry.invalid/hello:1"
            # It is a ShadowPod's pod, as Liqo makes them.
            shadows = items(env.provider_api, "offloading.liqo.io", "shadowpods", remote_ns)
            assert [s["metadata"]["name"] for s in shadows] == ["hello"]
        finally:
            with contextlib.suppress(ApiException):
                core_c.delete_namespaced_pod("hello", ns, grace_period_seconds=0)
            try:
                custom(env.consumer_api).delete_namespaced_custom_object(
                    "offloading.liqo.io", "v1beta1", ns, "namespaceoffloadings", "offloading"
                )
                wait_for(
                    "the NamespaceOffloading to be gone",
                    lambda: (
                        get(env.consumer_api, "offloading.liqo.io", "namespaceoffloadings", ns, "offloading") is None
                    ),
                    timeout=90,
                )
            except ApiException:
                pass
            core_c.delete_namespace(ns)

    # --- tests with a peering of their own -----------------------------------------------------------------------

    def test_resources_update_reaches_the_resource_slice(self, peered: tuple[RealEnv, str]) -> None:
        env, ns = peered
        _resources_follow(env, ns, {"cpu": "3", "memory": "2Gi"})

    # The two below come after the tests that read the peering or change it in place, and before the
    # GatewayClient's deletion: both need a Ready peering to start from, which that test may not leave (below).
    def test_secret_rotation_takes_effect_and_releases_the_old_client(
        self, peered: tuple[RealEnv, str], capsys: pytest.CaptureFixture[str]
    ) -> None:
        """The kubeconfig Secret rotated (testenv.rotation) under Liqo itself: new valid credentials (a
        ServiceAccount token with cluster-admin on the provider, the admin kubeconfig, the token again) are
        used without restarting the operator (the new identity writes on the provider, its audit log says)
        and the old client's connections go; broken credentials give Ready False ProviderUnauthorized with no
        credential in the status; restored, Ready again. Every object of the peering on both clusters
        (ForeignClusters and the VirtualNode included) keeps its uid throughout."""
        env, ns = peered
        env.peerings.wait_status(ns, NAME, "ready", timeout=120)
        uids = lambda: object_uids(env)  # noqa: E731 - ForeignClusters and the VirtualNode included
        Rotation(env, ns, NAME, env.pair["provider"], uids, lambda t: _bench(capsys, t), ready_timeout=120).run()

    def test_the_consumers_api_server_and_etcd_restart(
        self, peered: tuple[RealEnv, str], capsys: pytest.CaptureFixture[str]
    ) -> None:
        """The consumer's kube-apiserver restarts (SIGTERM, as a rolling restart does), then its etcd, under a
        Ready peering with Liqo itself. The operator reconnects by itself: on neither cluster does it write
        anything but its status and bookkeeping (the audit logs), no object of the peering is re-created (the
        same uids; per Liqo kind as many as before, on both sides), the peering is Ready with its readyAt,
        cluster IDs and observedGeneration kept, and a spec change afterwards reaches the ResourceSlice and the
        virtual Node. Liqo's components on the consumer lose their API server too: the test waits until they
        show they are back (_liqo_not_back), and writes what of Liqo's changed meanwhile (conditions that
        moved, leases that changed hands, containers that restarted) to its log."""
        env, ns = peered
        # From a settled state: everything _liqo_not_back looks at fine (the test before changed the peering).
        _wait_liqo_back(env, ns, datetime.min.replace(tzinfo=UTC), set(), "settled before the restarts")
        before = env.peerings.status(ns, NAME)
        apis = {"consumer": env.consumer_api, "provider": env.provider_api}
        consumer = env.pair["consumer"]
        objects = object_uids(env)
        counts = {side: inventory.liqo_objects(api) for side, api in apis.items()}
        snapshot, restarts = _liqo_snapshot(env, ns), _liqo_restarts(env)
        leases, every_lease = _live_leases(env), _leases(env)
        since = datetime.now(UTC)
        clock = time.monotonic()
        consumer.restart("kube-apiserver")
        marks = {"kube-apiserver restarted": time.monotonic() - clock}
        consumer.restart("etcd")
        marks["etcd restarted"] = time.monotonic() - clock
        back = datetime.now(UTC)
        seen = _wait_liqo_back(env, ns, back, leases, "back after the restarts")
        marks["Liqo back"] = time.monotonic() - clock
        sys.stderr.write(f"\nLiqo's Leases on the consumer before the restarts: {every_lease}; held: {sorted(leases)}")
        sys.stderr.write(_what_liqo_did(env, ns, snapshot, restarts, seen))

        assert operator_writes(consumer.audit_log, since) == []
        assert operator_writes(env.pair["provider"].audit_log, since) == []
        after = env.peerings.status(ns, NAME)
        for key in ("readyAt", "localClusterID", "remoteClusterID", "observedGeneration"):
            assert after[key] == before[key], key
        assert object_uids(env) == objects, "an object of the peering was re-created"
        assert {side: inventory.liqo_objects(api) for side, api in apis.items()} == counts
        # And it still reacts: a spec change reaches the ResourceSlice, Liqo's copy and the virtual Node.
        _resources_follow(env, ns, {"cpu": "1", "memory": "1Gi"})
        marks["spec change followed"] = time.monotonic() - clock
        _bench(
            capsys, "consumer's API server and etcd restarted: " + ", ".join(f"{k} {v:.1f}s" for k, v in marks.items())
        )

    # After the restarts: the second virtual kubelet leaves its Leases behind, recently renewed, which the
    # restart test would take for a live component's.
    def test_a_second_resource_slice_gets_its_own_virtual_node_and_goes_alone(
        self, peered: tuple[RealEnv, str], capsys: pytest.CaptureFixture[str]
    ) -> None:
        """spec.offloading as a list of two slices: the first the single form's (named after the provider, the
        same resources), so nothing of it changes; the second gets a virtual node of its own from Liqo, Ready,
        both in status.virtualNodes. Dropped from the list, the second goes with its virtual node and Node, and
        the first keeps every uid; so does going back to the single form."""
        env, ns = peered
        env.peerings.wait_status(ns, NAME, "ready", timeout=120)
        resources = env.peerings.get(ns, NAME)["spec"]["offloading"]["resources"]  # type: ignore[index]
        uids = object_uids(env)
        c_ns = tenant_ns(env.consumer_api, env.provider_id)
        second = f"{env.provider_id}-second"
        first = {"name": env.provider_id, "resources": resources}
        core = k8s.CoreV1Api(env.consumer_api)

        def settled(what: str, virtual_nodes: list[str]) -> float:
            """Ready for the current generation with these virtual nodes Ready (status and Nodes); seconds taken."""
            clock = time.monotonic()
            generation = env.peerings.get(ns, NAME)["metadata"]["generation"]  # type: ignore[index]

            seen: list[dict[str, Any]] = [{}]

            def done() -> bool:
                status = env.peerings.status(ns, NAME)
                shown = {v["name"]: v["ready"] for v in status.get("virtualNodes") or []}
                nodes = core.list_node(label_selector=f"liqo.io/remote-cluster-id={env.provider_id}").items
                seen[0] = {
                    "observedGeneration": (status.get("observedGeneration"), generation),
                    "peerStatus": status.get("peerStatus"),
                    "status.virtualNodes": shown,
                    "Nodes": sorted(str(n.metadata.name) for n in nodes if n.metadata),
                }
                return (
                    status.get("observedGeneration") == generation
                    and status.get("peerStatus") == "ready"
                    and shown == dict.fromkeys(virtual_nodes, True)
                    and seen[0]["Nodes"] == sorted(virtual_nodes)
                )

            try:
                wait_for(what, done, timeout=240)
            except AssertionError as exc:
                raise AssertionError(f"{exc}\nlast seen: {seen[0]}\n{env.diagnostics()}") from None
            took = time.monotonic() - clock
            _bench(capsys, f"{what}: {took:.1f}s")
            return took

        def slices() -> list[str]:
            found = items(env.consumer_api, "authentication.liqo.io", "resourceslices", c_ns)
            return sorted(
                o["metadata"]["name"] for o in found if o["metadata"].get("labels", {}).get(REPLICATED) != "true"
            )

        second_slice = {"name": second, "resources": {"cpu": "100m", "memory": "128Mi", "pods": "10"}}
        env.peerings.patch(
            ns, NAME, {"spec": {"offloading": {"resources": None, "resourceSlices": [first, second_slice]}}}
        )
        settled("two ResourceSlices -> two virtual nodes Ready", [env.provider_id, second])
        assert slices() == sorted([env.provider_id, second])
        status = env.peerings.status(ns, NAME)
        assert {s["name"]: s["accepted"] for s in status["resourceSlices"]} == {env.provider_id: True, second: True}
        assert {v["name"]: v.get("resourceSlice") for v in status["virtualNodes"]} == {
            env.provider_id: env.provider_id,
            second: second,
        }
        assert object_uids(env) == uids  # the first slice and its virtual node untouched

        env.peerings.patch(ns, NAME, {"spec": {"offloading": {"resourceSlices": [first]}}})
        settled("the second ResourceSlice dropped -> its virtual node gone", [env.provider_id])
        assert slices() == [env.provider_id]
        assert get(env.consumer_api, "offloading.liqo.io", "virtualnodes", c_ns, second) is None
        assert object_uids(env) == uids

        env.peerings.patch(ns, NAME, {"spec": {"offloading": {"resourceSlices": None, "resources": resources}}})
        settled("back to the single ResourceSlice", [env.provider_id])
        assert object_uids(env) == uids

    # Last in the class: after it, Liqo's virtual node may stay NotReady (below), which the tests before it
    # must not inherit.
    def test_deleted_gateway_client_comes_back(
        self, peered: tuple[RealEnv, str], capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A deleted GatewayClient is re-created by the operator and Liqo's tunnel comes back (NetworkReady).

        Whether the peering is then Ready again is Liqo's virtual kubelet's call, and is printed, not asserted:
        on Liqo's chart the virtual Node, set NotReady while the tunnel was down, twice stayed NotReady after
        the ForeignCluster's networking was Established again, when this test ran right after the resources
        update (cause not found: docs/liqo-behaviour.md)."""
        env, ns = peered
        c_ns = tenant_ns(env.consumer_api, env.provider_id)
        old = get(env.consumer_api, "networking.liqo.io", "gatewayclients", c_ns, env.provider_id)
        assert old
        custom(env.consumer_api).delete_namespaced_custom_object(
            "networking.liqo.io", "v1beta1", c_ns, "gatewayclients", env.provider_id
        )

        def recreated() -> bool:
            new = get(env.consumer_api, "networking.liqo.io", "gatewayclients", c_ns, env.provider_id)
            return bool(new) and new["metadata"]["uid"] != old["metadata"]["uid"]  # type: ignore[index]

        wait_for("the GatewayClient to be re-created", recreated, timeout=90)
        deleted = time.monotonic()

        def network_ready() -> dict[str, Any] | None:
            conds = env.peerings.status(ns, NAME).get("conditions") or []
            cond = next((c for c in conds if c["type"] == "NetworkReady"), None)
            return cond if cond and cond["status"] == "True" else None

        p_ns = tenant_ns(env.provider_api, env.consumer_id)

        def tunnel() -> tuple[Any, ...]:
            """What the tunnel's coming back goes through: the stage's message and both Connections' states."""
            conds = env.peerings.status(ns, NAME).get("conditions") or []
            message = next((c.get("message") for c in conds if c["type"] == "NetworkReady"), None)
            conns = [
                (c["metadata"]["resourceVersion"], (c.get("status") or {}).get("value"))
                for api, where in ((env.consumer_api, c_ns), (env.provider_api, p_ns))
                for c in items(api, "networking.liqo.io", "connections", where)
            ]
            return (message, tuple(conns))

        # On a loaded machine the gateways take longer to start: the wait lasts while they make progress.
        wait_progressing("NetworkReady again (the tunnel back up)", network_ready, tunnel, timeout=180)
        try:
            # 20 s: when it came back it took seconds; when not, minutes did not do (docs/liqo-behaviour.md):
            # more only costs CI time.
            env.peerings.wait_status(ns, NAME, "ready", timeout=20)
            outcome = f"Ready again {time.monotonic() - deleted:.1f}s after the re-creation"
        except AssertionError:
            outcome = "not Ready within 20s: " + str(env.peerings.status(ns, NAME).get("stage"))
        with capsys.disabled():
            print(f"\nBENCH real Liqo ({install_kind()}): GatewayClient deleted -> NetworkReady again; {outcome}")


def test_timeout_while_connections_are_withheld_then_ready(rcase: tuple[RealEnv, str]) -> None:
    """The tunnel is withheld: on the faster tier the stand-in keeps the Connections from ever turning
    Connected, and the peering times out; on Liqo's chart the consumer's node drops the gateways' UDP, Liqo's
    gateways report the Connection in Error (after their pings fail, about 15 s), and the peering says so,
    naming what to check. Either way it is Ready once the tunnel is let through."""
    env, ns = rcase
    env.set_connection_fault("Never")
    env.peerings.create(ns, NAME, env.spec(timeout="20s"))
    if install_kind() == "processes":
        status = env.peerings.wait_status(ns, NAME, "timeout", timeout=120)
        stalled = next(c for c in status["conditions"] if c["type"] == "Stalled")
        assert stalled["status"] == "True" and stalled["reason"] == "Timeout"
    else:
        # Liqo's ResourceSlice webhook lists from its cache, which may still hold the last test's slice for a
        # moment: the status may say AdmissionDenied on the way, truthfully, before the tunnel's error.
        ready = env.peerings.wait_reason(ns, NAME, "GatewayUnreachable", timeout=120)
        assert env.peerings.status(ns, NAME)["peerStatus"] == "error"
        # The message names the endpoint that could not be reached: the gateway client's, on the consumer.
        client = get(
            env.consumer_api,
            "networking.liqo.io",
            "gatewayclients",
            tenant_ns(env.consumer_api, env.provider_id),
            env.provider_id,
        )
        assert client, "no GatewayClient on the consumer"
        endpoint = client["spec"]["endpoint"]
        dialed = f"udp://{endpoint['addresses'][0]}:{endpoint['port']}"
        assert f"Open {dialed} from the consumer's gateway to the provider" in ready["message"], (endpoint, ready)
        assert "replicas ready" in ready["message"], ready
        conns = {
            side: [c.get("status", {}).get("value") for c in items(api, "networking.liqo.io", "connections", where)]
            for side, api, where in (
                ("consumer", env.consumer_api, tenant_ns(env.consumer_api, env.provider_id)),
                ("provider", env.provider_api, tenant_ns(env.provider_api, env.consumer_id)),
            )
        }
        assert "Error" in conns["consumer"] + conns["provider"], conns  # Liqo's gateways wrote it
    env.set_connection_fault(None)
    status = env.peerings.wait_status(ns, NAME, "ready", timeout=180)
    assert next(c for c in status["conditions"] if c["type"] == "Stalled")["status"] == "False"


def test_operator_killed_mid_way_resumes_without_duplicates(rcase: tuple[RealEnv, str]) -> None:
    env, ns = rcase
    env.set_connection_fault("Never")  # hold the peering in networking while the operator dies
    env.peerings.create(ns, NAME, env.spec())
    env.peerings.wait_status(ns, NAME, "establishing", timeout=60)
    wait_for(
        "the GatewayServer on the provider",
        lambda: items(
            env.provider_api, "networking.liqo.io", "gatewayservers", tenant_ns(env.provider_api, env.consumer_id)
        ),
        timeout=90,
    )
    env.operator.kill()
    env.set_connection_fault(None)
    env.operator.start()
    env.peerings.wait_status(ns, NAME, "ready", timeout=240)
    assert_one_of_each(env)


# The operator SIGKILLed during each stage, at each stage's end and during teardown, against Liqo itself: the
# six points of testenv.killpoints.
REAL_KILL_POINTS = tuple(POINTS)
_no_kill: dict[str, tuple[Counts, Counts]] = {}


@pytest.mark.parametrize("where", REAL_KILL_POINTS)
def test_killed_at_with_real_liqo(rcase: tuple[RealEnv, str], where: str) -> None:
    """Killed at `where`, restarted: the peering completes and unpeers, and on both clusters the objects per
    kind change exactly as in a cycle with no kill (testenv.killpoints)."""
    env, ns = rcase
    apis: dict[str, k8s.ApiClient] = {"consumer": env.consumer_api, "provider": env.provider_api}
    cycle = Cycle(env, ns, apis, env.spec(), ready_timeout=240)
    cycle.run(POINTS[where], cycle.reference(_no_kill))


def test_a_hung_provider_holds_up_no_other_peering_and_a_frozen_one_recovers(
    rcase: tuple[RealEnv, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Hung providers against Liqo itself. A peering whose provider hangs (a tarpit
    on loopback, testenv.operator_support.tarpit_kubeconfig: there is one real provider here) says
    ProviderUnreachable, naming it; a peering to Liqo's provider created meanwhile becomes Ready as usual (its
    time is printed): no call to the hung provider holds it up. Then that provider's kube-apiserver is frozen
    (SIGSTOP) for 60 s (_frozen_and_back). Deleted, the peering unpeers both sides, and Liqo removes the virtual
    Node and stops its virtual kubelet.

    The freeze is on this peering, not on TestPeeredWithRealLiqo's shared one: after it Liqo publishes no
    address for the gateway server until something else about that gateway changes (docs/liqo-behaviour.md),
    so the shared peering's GatewayClient, which its last test deletes, could not be re-created."""
    env, ns = rcase
    with tarpit_kubeconfig(env.provider_kubeconfig()) as (hung, where):
        env.peerings.put_kubeconfig_secret(ns, "hung", hung)
        env.peerings.create(ns, "stuck", env.spec(remoteKubeconfigSecretRef={"name": "hung"}))
        cond = env.peerings.wait_reason(ns, "stuck", "ProviderUnreachable", timeout=60)
        assert cond["status"] == "False" and where in cond["message"], cond
        started = time.monotonic()
        env.peerings.create(ns, NAME, env.spec())
        env.peerings.wait_status(ns, NAME, "ready", timeout=240)
        took = time.monotonic() - started
        with capsys.disabled():
            print(
                f"\nBENCH real Liqo ({install_kind()}): create -> Ready beside a peering whose provider hangs:"
                f" {took:.1f}s"
            )
        assert (env.peerings.condition(ns, "stuck", "Ready") or {}).get("reason") == "ProviderUnreachable"
        # Its provider never answers: force-delete lets it go (it never learned a provider's ID: nothing to
        # unpeer anywhere). Annotated before the delete, which may then complete at once.
        env.peerings.patch(
            ns, "stuck", {"metadata": {"annotations": {"peering.liqo-operator.io/force-delete": "true"}}}
        )
        env.peerings.delete(ns, "stuck")
        env.peerings.wait_gone(ns, "stuck", timeout=60)
    assert env.peerings.status(ns, NAME)["peerStatus"] == "ready"
    _frozen_and_back(env, ns, capsys)
    took = unpeer(env, ns, NAME)
    with capsys.disabled():
        print(f"\nBENCH real Liqo ({install_kind()}): provider API server frozen -> unpeered: {took:.1f}s")
    # Liqo itself removed the virtual node and stopped its virtual kubelet.
    wait_for(
        "the virtual Node to be gone",
        lambda: not k8s.CoreV1Api(env.consumer_api).list_node(label_selector="liqo.io/type=virtual-node").items,
        timeout=90,
    )
    wait_for("the virtual kubelet to stop", lambda: env.pair.virtual_kubelets() == 0, timeout=60)


def _frozen_and_back(env: RealEnv, ns: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The provider's kube-apiserver frozen (SIGSTOP) HUNG_SECONDS while the peering is Ready: connections to it
    hang instead of being refused. While it lasts the status says ProviderUnreachable, naming the server
    (testenv.operator_support.provider_hung); once it thaws the peering is Ready by itself (no spec change, no
    operator restart), every object of the peering on both clusters is the one there was (same uids, as many
    per Liqo kind, one of each), and the operator wrote nothing on either cluster but its bookkeeping. What
    Liqo showed meanwhile (the consumer's side while frozen, both sides on the way back) and its containers'
    restarts go to the test's log; how long each step took is printed, not asserted."""
    objects = object_uids(env)
    counts = {side: inventory.liqo_objects(api) for side, api in env.apis.items()}
    restarts = _liqo_restarts(env)
    since = datetime.now().astimezone()
    frozen = time.monotonic()
    during: list[tuple[str, str]] = []

    def observe() -> None:
        now = _liqo_signals(env, provider=False)
        if not during or during[-1][1] != now:
            during.append((f"+{time.monotonic() - frozen:.1f}s", now))

    detected = provider_hung(env.pair["provider"], env.peerings, ns, NAME, observe)
    took, seen = _ready_again(env, ns)
    after = _liqo_restarts(env)
    changed = {pod: n - restarts.get(pod, 0) for pod, n in after.items() if n != restarts.get(pod, 0)}
    sys.stderr.write(
        "\nLiqo while the provider's API server was frozen (the consumer's side):\n"
        + "\n".join(f"{at} {what}" for at, what in during)
        + "\nReady after the thaw:\n"
        + "\n".join(seen)
        + f"\nLiqo's container restarts: {changed}\n"
    )
    with capsys.disabled():
        print(
            f"\nBENCH real Liqo ({install_kind()}): provider API server frozen (Ready) -> ProviderUnreachable:"
            f" {detected:.1f}s; thawed -> Ready: {took:.1f}s"
        )
        # What Ready waited for after the thaw, in the suite's log even when it passes: under load Liqo's
        # offloading can take a minute to come back, and the log says on what it waited.
        print("".join(f"\n  {line}" for line in seen))
    assert object_uids(env) == objects, "an object of the peering was re-created"
    assert {side: inventory.liqo_objects(api) for side, api in env.apis.items()} == counts
    assert_one_of_each(env)
    writes = {side: operator_writes(env.pair[side].audit_log, since) for side in env.apis}
    assert writes == {"consumer": [], "provider": []}


# Getting started's liqoctl blocks, run as written: the peering user made for this consumer, and revoked.
GENERATE = doc_blocks.block("docs/getting-started.md", "liqoctl generate peering-user ")
DELETE = doc_blocks.block("docs/getting-started.md", "liqoctl delete peering-user ")


def _liqoctl_peering_user(env: RealEnv, page_block: doc_blocks.Block, home: Path) -> None:
    """One of Getting started's liqoctl blocks, with the provider's admin kubeconfig, this consumer's cluster ID,
    and ``home``/provider.kubeconfig for the kubeconfig liqoctl prints."""
    values = {
        "consumer_id": env.consumer_id,
        "provider_admin_kubeconfig": str(env.pair["provider"].kubeconfig),
        "provider_kubeconfig": str(home / "provider.kubeconfig"),
    }
    path = f"{liqo_binary('liqoctl').parent}:/usr/bin:/bin"
    doc_blocks.shell(page_block, values, {"PATH": path, "HOME": str(home)}, timeout=120)


def _peering_user_kubeconfig(env: RealEnv, home: Path) -> bytes:
    """The kubeconfig Getting started's `liqoctl generate peering-user` block leaves in provider.kubeconfig."""
    _liqoctl_peering_user(env, GENERATE, home)
    written = (home / "provider.kubeconfig").read_text()
    assert written.startswith("apiVersion:"), f"not a kubeconfig after the page's sed:\n{written[:2000]}"
    return written.encode()


def test_least_privilege_peering_user(rcase: tuple[RealEnv, str], tmp_path: Path) -> None:
    """The kubeconfig `liqoctl generate peering-user` makes is enough: it may neither patch nor watch, nor list
    namespaces. A right taken from it gives an error naming the verb and the resource; given back, the peering
    goes on; deleted, nothing is left on either side."""
    env, ns = rcase
    rbac = k8s.RbacAuthorizationV1Api(env.provider_api)
    user_secret = "peering-user-kubeconfig"
    deleted = False  # the peering user, by Getting started's last block
    env.peerings.put_kubeconfig_secret(ns, user_secret, _peering_user_kubeconfig(env, tmp_path))
    p_ns = tenant_ns(env.provider_api, env.consumer_id)
    # Take "create tenants" away: the tenant namespace's RoleBinding points at a copy of Liqo's ClusterRole
    # without it (roleRef is immutable, so the binding is re-made).
    listed: Any = rbac.list_namespaced_role_binding(p_ns, _preload_content=False)
    writer = next(b for b in listed.json()["items"] if b["metadata"]["name"].endswith("-tenant-ns-writer"))
    role: Any = rbac.read_cluster_role(writer["roleRef"]["name"], _preload_content=False)
    rules = role.json()["rules"]
    for rule in rules:
        if "tenants" in rule.get("resources", []):
            rule["verbs"] = [v for v in rule["verbs"] if v != "create"]
    lacking = "lpo-e2e-peering-user-without-tenant-create"
    role_body: Any = {"metadata": {"name": lacking}, "rules": rules}
    rbac.create_cluster_role(role_body)

    def bind(cluster_role: str) -> None:
        rbac.delete_namespaced_role_binding(writer["metadata"]["name"], p_ns)
        body: Any = {
            "metadata": {"name": writer["metadata"]["name"], "labels": writer["metadata"].get("labels", {})},
            "subjects": writer["subjects"],
            "roleRef": {**writer["roleRef"], "name": cluster_role},
        }
        rbac.create_namespaced_role_binding(p_ns, body)

    try:
        bind(lacking)
        env.peerings.create(ns, NAME, env.spec(remoteKubeconfigSecretRef={"name": user_secret}))
        # A binding just made reaches the API server's authorizer a moment later, so an earlier call may be
        # refused too: wait for the error about the right that is missing for good.
        wanted = f"create tenants.authentication.liqo.io in namespace {p_ns}"

        def refused() -> dict[str, Any] | None:
            status = env.peerings.status(ns, NAME)
            ready: dict[str, Any] = next((c for c in status.get("conditions") or [] if c["type"] == "Ready"), {})
            return status if ready.get("reason") == "ProviderForbidden" and wanted in ready["message"] else None

        status = wait_for("the error to name the missing right", refused, timeout=120)
        assert status["peerStatus"] == "error"
        stalled = next(c for c in status["conditions"] if c["type"] == "Stalled")
        assert stalled["reason"] == "ProviderForbidden" and wanted in stalled["message"], stalled
        bind(writer["roleRef"]["name"])  # the fix: the right is back
        env.peerings.wait_status(ns, NAME, "ready", timeout=240)
        for api, group, plural, where in (
            (env.provider_api, "authentication.liqo.io", "tenants", p_ns),
            (env.provider_api, "networking.liqo.io", "gatewayservers", p_ns),
            (env.provider_api, "networking.liqo.io", "configurations", p_ns),
        ):
            assert len(items(api, group, plural, where)) == 1, plural
        env.peerings.delete(ns, NAME)
        env.peerings.wait_gone(ns, NAME, timeout=180)
        for api, group, plural, where in (
            (env.provider_api, "authentication.liqo.io", "tenants", p_ns),
            (env.provider_api, "networking.liqo.io", "gatewayservers", p_ns),
            (env.provider_api, "networking.liqo.io", "configurations", p_ns),
            (
                env.consumer_api,
                "authentication.liqo.io",
                "resourceslices",
                tenant_ns(env.consumer_api, env.provider_id),
            ),
        ):
            assert items(api, group, plural, where) == [], f"{plural} left in {where}"
        # Getting started's last step: revoked, the user may no longer read Liqo's namespace.
        _liqoctl_peering_user(env, DELETE, tmp_path)
        deleted = True
        revoked = k8s.CoreV1Api(api_client(str(tmp_path / "provider.kubeconfig")))
        with pytest.raises(ApiException) as denied:
            revoked.list_namespaced_config_map(LIQO_NAMESPACE)
        assert denied.value.status in (401, 403), denied.value
    finally:
        # Whatever happened, the peering can still be unpeered once the peering-user is revoked below.
        env.peerings.put_kubeconfig_secret(ns, user_secret, env.provider_kubeconfig())
        with contextlib.suppress(ApiException):
            bind(writer["roleRef"]["name"])
        with contextlib.suppress(ApiException):
            rbac.delete_cluster_role(lacking)
        if not deleted:  # the test failed before its last step: that error stands
            with contextlib.suppress(AssertionError):
                _liqoctl_peering_user(env, DELETE, tmp_path)


PEERING_USER_LABEL = "liqo.io/peering-user-name"  # Liqo's pkg/consts PeeringUserNameLabelKey
MINTING_RESOURCES = {
    "namespaces",
    "clusterroles",
    "clusterrolebindings",
    "rolebindings",
    "certificatesigningrequests",
    "certificatesigningrequests/approval",
}


def _peering_user_objects(env: RealEnv) -> dict[str, list[tuple[str, list[str]]]]:
    """Liqo's peering user for this consumer on the provider (what `liqoctl generate peering-user` makes, and
    the operator's revoke ClusterRole): name and bound users, by kind."""
    rbac = k8s.RbacAuthorizationV1Api(env.provider_api)
    selector = f"{PEERING_USER_LABEL}=liqo-peer-user-{env.consumer_id}"
    found: dict[str, list[tuple[str, list[str]]]] = {}
    for kind, listed in (
        ("rolebindings", rbac.list_role_binding_for_all_namespaces(label_selector=selector, _preload_content=False)),
        ("clusterrolebindings", rbac.list_cluster_role_binding(label_selector=selector, _preload_content=False)),
        ("clusterroles", rbac.list_cluster_role(label_selector=selector, _preload_content=False)),
    ):
        found[kind] = sorted(
            (o["metadata"]["name"], [s["name"] for s in o.get("subjects") or []])
            for o in cast(Any, listed).json()["items"]
        )
    csrs: Any = k8s.CertificatesV1Api(env.provider_api).list_certificate_signing_request(_preload_content=False)
    found["csrs"] = [
        (c["metadata"]["name"], []) for c in csrs.json()["items"] if env.consumer_id in c["metadata"]["name"]
    ]
    return found


def _refused_with(kubeconfig: bytes, namespace: str) -> int | None:
    """What the provider answers the minted credential reading its tenant namespace: None when allowed."""
    api = k8s_config.new_client_from_config_dict(yaml.safe_load(kubeconfig))
    try:
        k8s.CoreV1Api(api).read_namespace(namespace)
    except ApiException as exc:
        return int(exc.status)
    finally:
        api.close()
    return None


TLS_COMPATIBILITY = (
    "--tls-compatibility-mode"  # liqo-controller-manager's flag (chart authentication.tlsCompatibilityMode)
)


def _set_tls_compatibility(env: RealEnv, on: bool) -> bool:
    """The provider's liqo-controller-manager run with --tls-compatibility-mode=<on>, rolled out, as the chart's
    value authentication.tlsCompatibilityMode makes it (the flag only picks the algorithm of keys Liqo has not
    made yet: its own exist already). False when Liqo runs as processes here: no Deployment to read."""
    if install_kind() != "chart":
        return False
    apps = k8s.AppsV1Api(env.provider_api)
    selector = "app.kubernetes.io/name=controller-manager,app.kubernetes.io/component=controller-manager"
    (deployment,) = apps.list_namespaced_deployment("liqo", label_selector=selector).items
    containers = deployment.spec.template.spec.containers  # type: ignore[union-attr]
    index = next(i for i, c in enumerate(containers) if c.name == "controller-manager")
    args = [a for a in containers[index].args or [] if not a.startswith(TLS_COMPATIBILITY)]
    args.append(f"{TLS_COMPATIBILITY}={str(on).lower()}")
    patch = [{"op": "replace", "path": f"/spec/template/spec/containers/{index}/args", "value": args}]
    apps.patch_namespaced_deployment(str(deployment.metadata.name), "liqo", patch)  # type: ignore[union-attr]
    cast(Any, env.pair).wait_available(sides=("provider",))
    return True


def test_minted_credentials_alone(
    rcase: tuple[RealEnv, str], leak_scan: LeakScan, capsys: pytest.CaptureFixture[str]
) -> None:
    """spec.credentials.mint with deleteBootstrapSecret: the operator mints Liqo's peering user with the admin
    kubeconfig, peers as that user alone (the provider's audit log: every Liqo object written by it), deletes
    the bootstrap Secret and keeps reconciling; deleting the LiqoPeering unpeers, revokes the user (the
    provider refuses its certificate) and leaves nothing of it on either cluster. The provider's Liqo runs in
    TLS compatibility mode (on Liqo's chart): keyAlgorithm Auto reads it, as liqoctl does, and the minted user's
    key is RSA."""
    env, ns = rcase
    clock = time.monotonic()
    tls_compatible = _set_tls_compatibility(env, True)
    try:
        switched = time.monotonic() - clock
        _minted_credentials_alone(env, ns, leak_scan, capsys, tls_compatible, switched)
    finally:
        if tls_compatible:
            _set_tls_compatibility(env, False)


def _minted_credentials_alone(
    env: RealEnv,
    ns: str,
    leak_scan: LeakScan,
    capsys: pytest.CaptureFixture[str],
    tls_compatible: bool,
    switched: float,
) -> None:
    core = k8s.CoreV1Api(env.consumer_api)
    apis = {"consumer": env.consumer_api, "provider": env.provider_api}
    peered_before = get(env.consumer_api, "core.liqo.io", "foreignclusters", None, env.provider_id) is not None
    before = inventory.counts(apis)
    started = datetime.now(UTC)
    clock = time.monotonic()
    credentials = {"mint": True, "deleteBootstrapSecret": True}
    env.peerings.create(ns, NAME, env.spec(credentials=credentials))
    status = env.peerings.wait_status(ns, NAME, "ready", timeout=240)
    marks = {"ready": time.monotonic() - clock}
    minted = next(c for c in status["conditions"] if c["type"] == "CredentialsMinted")
    assert minted["status"] == "True" and minted["reason"] == "Minted", minted
    user = status["credentials"]["user"]
    assert user.startswith(f"liqo-peer-user-{env.consumer_id}-"), status["credentials"]

    # The bootstrap Secret is gone; the minted one is the LiqoPeering's, protected while in use.
    wait_for("the bootstrap Secret to be deleted", lambda: SECRET not in _secret_names(core, ns), timeout=30)
    secret_name = status["credentials"]["secretName"]
    secret: Any = core.read_namespaced_secret(secret_name, ns, _preload_content=False)
    stored = secret.json()
    owner = env.peerings.get(ns, NAME)
    assert owner is not None
    assert [(o["kind"], o["uid"]) for o in stored["metadata"]["ownerReferences"]] == [
        ("LiqoPeering", owner["metadata"]["uid"])
    ]
    assert "peering.liqo-operator.io/kubeconfig-in-use" in stored["metadata"].get("finalizers", [])
    kubeconfig = base64.b64decode(stored["data"]["kubeconfig"])
    leak_scan.collect(apis)  # the minted credential joins the scan's needles before it goes
    # The key follows the provider's TLS compatibility mode (keyAlgorithm Auto); without a Deployment to read
    # (Liqo as processes), Ed25519 as liqoctl's default.
    key_data = yaml.safe_load(kubeconfig)["users"][0]["user"]["client-key-data"]
    key = serialization.load_pem_private_key(base64.b64decode(key_data), password=None)
    assert isinstance(key, rsa.RSAPrivateKey if tls_compatible else ed25519.Ed25519PrivateKey), type(key)

    # On the provider: liqoctl's bindings of Liqo's peering-user roles, to the minted user alone.
    p_ns = tenant_ns(env.provider_api, env.consumer_id)
    objects = _peering_user_objects(env)
    prefix = f"liqo-peer-user-{env.consumer_id}"
    assert objects == {
        "rolebindings": [(f"{prefix}-liqo-ns-reader", [user]), (f"{prefix}-tenant-ns-writer", [user])],
        "clusterrolebindings": [(f"{prefix}-revoke", [user])],
        "clusterroles": [(f"{prefix}-revoke", [])],
        "csrs": [],  # deleted once issued
    }, objects
    # Every write of the operator on the provider was the minted user's, but for the minting itself.
    writes = audit.writes(env.pair["provider"].audit_log, since=started, user_agent_prefix=OPERATOR_AGENT)
    by_bootstrap = sorted({(e.verb, e.resource) for e in writes if e.username != user})
    assert {resource for _, resource in by_bootstrap} <= MINTING_RESOURCES, by_bootstrap
    liqo_writes = audit.count_by([e for e in writes if e.username == user], "resource")
    assert liqo_writes["tenants"] and liqo_writes["configurations"], liqo_writes
    minted_at = max(e.received for e in writes if e.username != user)

    # The peering goes on with the minted credential alone: a spec change is reconciled.
    env.peerings.patch(ns, NAME, {"spec": {"timeout": "4m"}})
    wait_for(
        "the spec change to be reconciled",
        lambda: (lambda s: s.get("observedGeneration") == 2 and s.get("peerStatus") == "ready")(
            env.peerings.status(ns, NAME)
        ),
        timeout=60,
    )
    later = audit.writes(env.pair["provider"].audit_log, since=minted_at, user_agent_prefix=OPERATOR_AGENT)
    assert {e.username for e in later if e.received > minted_at} <= {user}

    marks["reconciled"] = time.monotonic() - clock
    env.peerings.delete(ns, NAME)
    env.peerings.wait_gone(ns, NAME, timeout=180)
    marks["unpeered"] = time.monotonic() - clock
    assert _refused_with(kubeconfig, p_ns) in (401, 403)
    assert _peering_user_objects(env) == {"rolebindings": [], "clusterrolebindings": [], "clusterroles": [], "csrs": []}
    assert _secret_names(core, ns) == set()
    kinds = [
        ("consumer", real_pair.RESOURCE_SLICE),
        ("consumer", real_pair.IDENTITY),
        ("provider", real_pair.TENANT),
        ("provider", real_pair.GATEWAY_SERVER),
        ("consumer", real_pair.GATEWAY_CLIENT),
    ]
    left = real_pair.in_tenant_namespaces(env, kinds)
    assert left == dict.fromkeys(left, 0), f"left in the tenant namespaces: {left}"
    # Both clusters as before the peering: Liqo's objects, Secrets and namespaces, counted (once what Liqo
    # keeps after a pair's first peering exists already; the one change is the deleted bootstrap Secret).
    expected: Counts = {"consumer": {"secrets": -1}, "provider": {}}
    deltas: list[Counts] = []

    def back() -> bool:
        deltas.append(_delta(inventory.counts(apis), before))
        return deltas[-1] == expected

    if peered_before:
        try:
            wait_for("both clusters back to what they held", back, timeout=60, interval=1)
        except AssertionError:
            raise AssertionError(f"objects changed by the peering: {deltas[-1]}") from None
    else:
        sys.stderr.write(
            f"\nfirst peering of the pair, Liqo's kept objects: {_delta(inventory.counts(apis), before)}\n"
        )
    marks["clean"] = time.monotonic() - clock
    if tls_compatible:
        marks["(provider's controller manager switched to TLS compatibility mode before)"] = switched
    with capsys.disabled():
        print(
            f"\nBENCH real Liqo ({install_kind()}): minted credentials: "
            + ", ".join(f"{k} {v:.1f}s" for k, v in marks.items())
        )


def _secret_names(core: k8s.CoreV1Api, namespace: str) -> set[str]:
    listed: Any = core.list_namespaced_secret(namespace, _preload_content=False)
    return {s["metadata"]["name"] for s in listed.json()["items"]}


def _delta(now: Counts, before: Counts) -> Counts:
    """What changed between two inventory counts, per side and kind."""
    return {
        side: {k: n - before[side].get(k, 0) for k, n in now[side].items() if n != before[side].get(k, 0)}
        | {k: -n for k, n in before[side].items() if k not in now[side]}
        for side in now
    }


def test_in_band_tenant_points_at_liqos_api_server_proxy(rcase: tuple[RealEnv, str]) -> None:
    """In-band without proxyURL: the Tenant carries Liqo's API server proxy IP (as the consumer reaches it).

    The consumer reaches the proxy at the IP Liqo's IPAM gave it on the provider, remapped when the clusters'
    external CIDRs overlap (on Liqo's chart both have its default; remapping itself is unit-tested with
    Liqo's examples). The
    peering cannot go further here: the proxy is reached through the tunnel and Liqo's routes, and those
    need Geneve on the chart install (docs/development/testing.md) and are stood in on the faster tier.
    """
    env, ns = rcase

    def proxy_ip() -> str | None:
        with contextlib.suppress(ApiException):
            ip = cast(
                dict[str, Any],
                custom(env.provider_api).get_namespaced_custom_object(
                    "ipam.liqo.io", "v1alpha1", "liqo", "ips", "api-server-proxy"
                ),
            )
            return cast(str | None, (ip.get("status") or {}).get("ip"))
        return None

    address = wait_for("Liqo's IPAM to give the provider's api-server-proxy IP an address", proxy_ip, timeout=60)
    offloading = {"createResourceSlice": False, "createVirtualNode": False}
    env.peerings.create(ns, NAME, env.spec(authentication={"inBand": True}, offloading=offloading))

    def tenant() -> dict[str, Any] | None:
        found: Any = custom(env.provider_api).list_cluster_custom_object("authentication.liqo.io", "v1beta1", "tenants")
        return next((t for t in found["items"] if t["spec"].get("clusterID") == env.consumer_id), None)

    found = wait_for("the Tenant on the provider", tenant, timeout=120)
    # As the consumer reaches it: when the two clusters' external CIDRs overlap (Liqo's chart gives both the
    # same default), Liqo remaps the provider's on the consumer, and the consumer's Configuration says to what.
    conf = get(
        env.consumer_api,
        "networking.liqo.io",
        "configurations",
        tenant_ns(env.consumer_api, env.provider_id),
        env.provider_id,
    )
    assert conf, "the consumer's Configuration for the provider"
    declared = ipaddress.ip_network(conf["spec"]["remote"]["cidr"]["external"][0])
    remapped = ipaddress.ip_network(
        ((conf.get("status") or {}).get("remote") or {}).get("cidr", {}).get("external", [str(declared)])[0]
    )
    offset = int(ipaddress.ip_address(address)) - int(declared.network_address)
    expected = ipaddress.ip_address(int(remapped.network_address) + offset)
    assert found["spec"].get("proxyURL") == f"http://{expected}:8118", (found["spec"], str(declared), str(remapped))


# --- bidirectional: both directions over one network ---------------------------------------------------------
def _directions(env: RealEnv) -> dict[str, list[str]]:
    """Each direction's objects on both clusters, by where and what: names, sorted."""
    c_ns, p_ns = tenant_ns(env.consumer_api, env.provider_id), tenant_ns(env.provider_api, env.consumer_id)
    found: dict[str, list[str]] = {}
    for side, api, ns in (("consumer", env.consumer_api, c_ns), ("provider", env.provider_api, p_ns)):
        for group, plural in (
            ("authentication.liqo.io", "tenants"),
            ("authentication.liqo.io", "resourceslices"),
            ("offloading.liqo.io", "virtualnodes"),
            ("networking.liqo.io", "gatewayservers"),
            ("networking.liqo.io", "gatewayclients"),
        ):
            # Liqo's CRD replicator copies each ResourceSlice to its provider: the copies are Liqo's.
            made = [
                o for o in items(api, group, plural, ns) if o["metadata"].get("labels", {}).get(REPLICATED) != "true"
            ]
            found[f"{side}/{plural}"] = sorted(o["metadata"]["name"] for o in made)
        # Liqo adds Identities of type ResourceSlice of its own; the peering's are the ControlPlane ones.
        identities = items(api, "authentication.liqo.io", "identities", ns)
        found[f"{side}/identities"] = sorted(
            i["metadata"]["name"] for i in identities if i["spec"]["type"] == "ControlPlane"
        )
        nodes = k8s.CoreV1Api(api).list_node(label_selector="liqo.io/type=virtual-node").items
        found[f"{side}/virtual nodes"] = sorted(str(n.metadata.name) for n in nodes)  # type: ignore[union-attr]
    return found


def _roles(env: RealEnv) -> dict[str, str | None]:
    """Liqo's ForeignCluster role for the peer, on each side."""
    return {
        side: ((get(api, "core.liqo.io", "foreignclusters", None, peer) or {}).get("status") or {}).get("role")
        for side, api, peer in (
            ("consumer", env.consumer_api, env.provider_id),
            ("provider", env.provider_api, env.consumer_id),
        )
    }


def _kept_by_liqo(env: RealEnv) -> dict[str, dict[str, set[str]]]:
    """Per side, what Liqo keeps after an unpeering: the peer's ForeignCluster, the tenant namespaces, and the
    certificates a provider issued (Secrets liqo-remote-certificate* in a tenant namespace)."""
    kept: dict[str, dict[str, set[str]]] = {}
    for side, api, peer in (
        ("consumer", env.consumer_api, env.provider_id),
        ("provider", env.provider_api, env.consumer_id),
    ):
        core = k8s.CoreV1Api(api)
        tenant = f"liqo.io/remote-cluster-id={peer},liqo.io/tenant-namespace=true"
        namespaces = {str(n.metadata.name) for n in core.list_namespace(label_selector=tenant).items}  # type: ignore[union-attr]
        secrets = {
            f"{ns}/{s.metadata.name}"  # type: ignore[union-attr]
            for ns in namespaces
            for s in core.list_namespaced_secret(ns).items
            if str(s.metadata.name).startswith("liqo-remote-certificate")  # type: ignore[union-attr]
        }
        fcs = {peer} if get(api, "core.liqo.io", "foreignclusters", None, peer) else set()
        kept[side] = {"fc": fcs, "ns": namespaces, "secrets": secrets}
    return kept


def _names(api: k8s.ApiClient, kinds: dict[str, int]) -> dict[str, list[str]]:
    """For a failure message: what there is of each Liqo kind (plural.group), by namespace/name."""
    found: dict[str, list[str]] = {}
    for kind in kinds:
        plural, _, group = kind.partition(".")
        if group:
            listed: Any = custom(api).list_cluster_custom_object(
                group, "v1beta1" if "ipam" not in group else "v1alpha1", plural
            )
            found[kind] = sorted(f"{o['metadata'].get('namespace')}/{o['metadata']['name']}" for o in listed["items"])
    return found


def _change(after: dict[str, dict[str, int]], before: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """Per side, the kinds whose count changed, and by how much."""
    return {
        side: {k: n - before[side].get(k, 0) for k, n in after[side].items() if n != before[side].get(k, 0)}
        | {k: -n for k, n in before[side].items() if k not in after[side]}
        for side in after
    }


def test_bidirectional_peering_both_ways_over_one_network(
    rcase: tuple[RealEnv, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """spec.bidirectional: the provider consumes this cluster too, over the one network. Ready needs both
    directions; Liqo's ForeignCluster says ConsumerAndProvider on both sides. spec.commonMetadata reaches the
    reverse direction's objects here in place. Turned off, only the reverse direction goes (the forward one is
    not touched); turned on again and deleted, both directions unpeer, network last, and neither cluster keeps
    anything of it."""
    env, ns = rcase
    apis = {"consumer": env.consumer_api, "provider": env.provider_api}
    before, names_before = inventory.counts(apis, liqos_own), _kept_by_liqo(env)
    cid, pid = env.consumer_id, env.provider_id
    forward = {
        "consumer/tenants": [],
        "consumer/resourceslices": [pid],
        "consumer/virtualnodes": [pid],
        "consumer/gatewayservers": [],
        "consumer/gatewayclients": [pid],
        "consumer/identities": [f"controlplane-{pid}"],
        "consumer/virtual nodes": [pid],
        "provider/tenants": [cid],
        "provider/resourceslices": [],
        "provider/virtualnodes": [],
        "provider/gatewayservers": [cid],  # one network: one server, one client, whatever the direction
        "provider/gatewayclients": [],
        "provider/identities": [],
        "provider/virtual nodes": [],
    }
    both = {
        **forward,
        "consumer/tenants": [pid],
        "provider/resourceslices": [cid],
        "provider/virtualnodes": [cid],
        "provider/identities": [f"controlplane-{cid}"],
        "provider/virtual nodes": [cid],
    }
    reverse_conditions = {"ReverseAuthenticationReady", "ReverseOffloadingReady"}
    spec = env.spec(bidirectional=True, reverse={"offloading": {"resources": {"cpu": "1", "memory": "1Gi"}}})

    started = time.monotonic()
    env.peerings.create(ns, NAME, spec)
    status = env.peerings.wait_status(ns, NAME, "ready", timeout=240)
    took = time.monotonic() - started
    conds = {c["type"]: c for c in status["conditions"]}
    assert reverse_conditions <= set(conds), conds
    assert all(conds[t]["status"] == "True" for t in ("NetworkReady", "AuthenticationReady", "OffloadingReady"))
    assert all(conds[t]["status"] == "True" and conds[t]["reason"] == "Established" for t in reverse_conditions)
    assert _directions(env) == both
    networks = {side: inventory.liqo_objects(api) for side, api in apis.items()}
    for kind in ("gatewayservers.networking.liqo.io", "gatewayclients.networking.liqo.io"):
        assert sum(counts.get(kind, 0) for counts in networks.values()) == 1, (kind, networks)
    # The reverse ResourceSlice asks for what spec.reverse.offloading says, and the consumer granted it.
    p_ns = tenant_ns(env.provider_api, cid)
    back = get(env.provider_api, "authentication.liqo.io", "resourceslices", p_ns, cid)
    assert back and back["spec"]["resources"] == {"cpu": "1", "memory": "1Gi"}, back
    # The status shows both slices, each as Liqo says it: this cluster's own, and the provider's, accepted here.

    def slices_shown() -> list[tuple[str, str, bool, dict[str, str]]]:
        shown = env.peerings.status(ns, NAME).get("resourceSlices") or []
        return sorted((s["name"], s["action"], s["accepted"], s.get("requested") or {}) for s in shown)

    wait_for(
        "the status to show the Consuming and the Providing ResourceSlice, both accepted",
        lambda: (
            slices_shown() == [(cid, "Providing", True, {"cpu": "1", "memory": "1Gi"}), (pid, "Consuming", True, {})]
        ),
        timeout=30,
    )
    # Each direction's identity certificates: the consumer's on the provider, the provider's on this cluster.
    wait_for(
        "status.certificates to show both directions' ControlPlane and ResourceSlice identities",
        lambda: (
            sorted(
                (c["heldBy"], c["type"], c.get("resourceSlice"))
                for c in env.peerings.status(ns, NAME).get("certificates") or []
            )
            == [
                ("consumer", "ControlPlane", None),
                ("consumer", "ResourceSlice", pid),
                ("provider", "ControlPlane", None),
                ("provider", "ResourceSlice", cid),
            ]
        ),
        timeout=30,
    )
    wait_for(
        "Liqo's ForeignClusters to say ConsumerAndProvider on both sides",
        lambda: _roles(env) == {"consumer": "ConsumerAndProvider", "provider": "ConsumerAndProvider"},
        timeout=90,
    )

    def peering_uids() -> dict[str, str]:
        # Without the ForeignClusters, which Liqo manages itself.
        return {key: uid for key, uid in object_uids(env).items() if "foreignclusters" not in key}

    uids = peering_uids()

    # spec.commonMetadata reaches the reverse direction's objects on this cluster in place: its Tenant and
    # nonce Secret are created once, then only relabelled (with this cluster's own, chart-given rights).
    c_ns = tenant_ns(env.consumer_api, pid)
    team = {"example.com/team": "both-ways"}
    env.peerings.patch(ns, NAME, {"spec": {"commonMetadata": {"labels": team}}})

    def reverse_labels() -> dict[str, dict[str, str]]:
        tenant = get(env.consumer_api, "authentication.liqo.io", "tenants", c_ns, pid) or {}
        nonce: Any = k8s.CoreV1Api(env.consumer_api).read_namespaced_secret("liqo-nonce", c_ns)
        return {
            "tenant": tenant.get("metadata", {}).get("labels") or {},
            "nonce": dict(nonce.metadata.labels or {}),
        }

    wait_for(
        "the reverse Tenant and nonce Secret to carry spec.commonMetadata's labels",
        lambda: all(team.items() <= labels.items() for labels in reverse_labels().values()),
        timeout=60,
    )
    assert peering_uids() == uids

    # Off: the reverse direction goes, the forward one is not touched.
    started_off = time.monotonic()
    env.peerings.patch(ns, NAME, {"spec": {"bidirectional": False}})
    generation = int(env.peerings.get(ns, NAME)["metadata"]["generation"])  # type: ignore[index]

    def off() -> dict[str, Any] | None:
        now = env.peerings.status(ns, NAME)
        types = {c["type"] for c in now.get("conditions") or []}
        done = now.get("observedGeneration") == generation and now.get("peerStatus") == "ready"
        return now if done and not types & reverse_conditions else None

    status = wait_for("the reverse direction to be removed", off, timeout=120)
    took_off = time.monotonic() - started_off
    assert _directions(env) == forward
    wait_for(
        "the Providing ResourceSlice to leave the status", lambda: slices_shown() == [(pid, "Consuming", True, {})]
    )
    assert peering_uids() == uids
    for t in ("NetworkReady", "AuthenticationReady", "OffloadingReady"):  # never flipped meanwhile
        now = next(c for c in status["conditions"] if c["type"] == t)
        assert now["status"] == "True" and now["lastTransitionTime"] == conds[t]["lastTransitionTime"], now
    # Here Liqo's ForeignCluster drops the reverse role as the provider's Tenant goes. On the provider it may
    # stay ConsumerAndProvider: Liqo re-reads it when the Identity goes, while Liqo still holds the Identity's
    # kubeconfig Secret (which counts too), and nothing it watches changes when that Secret goes (the next
    # look is its 10 h resync). The operator reads the Tenant itself (teardown.reverse_peered).
    wait_for("Liqo's ForeignCluster here to drop the reverse role", lambda: _roles(env)["consumer"] == "Provider")
    sys.stderr.write(f"\nForeignCluster roles once the reverse direction is removed: {_roles(env)}\n")

    # On again, then deleted: both directions unpeer, the network last.
    started_on = time.monotonic()
    env.peerings.change_and_wait_ready(ns, NAME, {"spec": {"bidirectional": True}})
    took_on = time.monotonic() - started_on
    assert _directions(env) == both
    started_delete = time.monotonic()
    env.peerings.delete(ns, NAME)
    env.peerings.wait_gone(ns, NAME, timeout=180)
    took_delete = time.monotonic() - started_delete
    # Liqo removes the virtual Nodes once their VirtualNodes are gone (the unpeering waited for those).
    wait_for("nothing of either direction", lambda: _directions(env) == {key: [] for key in both}, timeout=90)
    last: list[Any] = []

    def nothing_left() -> bool:
        # What Liqo keeps after any unpeering (liqoctl's too) is not the peering's: the ForeignCluster, the
        # tenant namespace and, on each direction's provider, the certificates it issued (Secrets
        # liqo-remote-certificate*, which it checks the next Tenant of the same consumer against). A peering
        # earlier in the suite leaves the forward direction's; this one's reverse direction adds its own.
        kept = _kept_by_liqo(env)
        change = _change(inventory.counts(apis, liqos_own), before)
        for side in change:
            for kind, names in (("foreignclusters.core.liqo.io", "fc"), ("namespaces", "ns"), ("secrets", "secrets")):
                change[side][kind] = change[side].get(kind, 0) - len(kept[side][names] - names_before[side][names])
                if change[side][kind] == 0:
                    del change[side][kind]
        last[:] = [change, kept]
        return change == {"consumer": {}, "provider": {}}

    try:
        wait_for("nothing of the peering left on either cluster", nothing_left, timeout=60, interval=1)
    except AssertionError:
        named = {side: _names(apis[side], kinds) for side, kinds in last[0].items()}
        raise AssertionError(f"left on the clusters (the change since before; what is there now): {named}") from None
    with capsys.disabled():
        print(
            f"\nBENCH real Liqo ({install_kind()}): bidirectional create -> Ready {took:.1f}s;"
            f" off -> reverse removed {took_off:.1f}s; on again -> Ready {took_on:.1f}s;"
            f" delete -> gone {took_delete:.1f}s"
        )


# --- the provider's API server stopped ------------------------------------------------------------------------
# Last in the module: the outage hits all of the provider's Liqo (its components lose their API server too),
# so no other test of this module comes after it. In the tier test_real_liqo_ha.py does, peering the pair
# afresh (it passed right after this test: Ready 24.5 s after its kill, against 6-15 s on a fresh pair).


def _liqo_restarts(env: RealEnv) -> dict[str, int]:
    """Container restarts of Liqo's Pods (its namespace and the peer's tenant namespace) on both clusters, by
    side/namespace/Pod: what an outage did to Liqo's components, for the log."""
    found: dict[str, int] = {}
    for side, api, peer in (
        ("consumer", env.consumer_api, env.provider_id),
        ("provider", env.provider_api, env.consumer_id),
    ):
        for ns in ("liqo", tenant_ns(api, peer)):
            listed: Any = k8s.CoreV1Api(api).list_namespaced_pod(ns, _preload_content=False)
            for pod in listed.json()["items"]:
                statuses = (pod.get("status") or {}).get("containerStatuses") or []
                found[f"{side}/{ns}/{pod['metadata']['name']}"] = sum(c.get("restartCount", 0) for c in statuses)
    return found


def _liqo_signals(env: RealEnv, provider: bool = True) -> str:
    """What of Liqo's Ready waits for, in one line: each side's Connection, the consumer's ForeignCluster
    conditions (the API server check the virtual kubelet's ping reads, the networking module's), the
    virtual Node's Ready condition. Without provider, the consumer's alone (the provider may hang). For the
    log only: a failed read is written down, not raised."""
    try:
        return _read_liqo_signals(env, provider)
    except (ApiException, AssertionError, urllib3.exceptions.HTTPError) as exc:
        return f"not read: {type(exc).__name__}"


def _read_liqo_signals(env: RealEnv, provider: bool = True) -> str:
    def connection(api: k8s.ApiClient, peer: str) -> str:
        if api is env.provider_api and not provider:
            return "not read"
        found = items(api, "networking.liqo.io", "connections", tenant_ns(api, peer))
        return ",".join(str((c.get("status") or {}).get("value")) for c in found) or "none"

    fc = get(env.consumer_api, "core.liqo.io", "foreignclusters", None, env.provider_id) or {}
    fc_status = fc.get("status") or {}
    conditions = fc_status.get("conditions") or []
    api_server: dict[str, Any] = next((c for c in conditions if c.get("type") == "APIServerStatus"), {})
    networking = (fc_status.get("modules") or {}).get("networking") or {}
    net = ",".join(f"{c.get('type')}={c.get('status')}" for c in networking.get("conditions") or [])
    virtual = _node_ready(env.consumer_api, f"metadata.name={env.provider_id}")
    signals = (
        f"Connection consumer={connection(env.consumer_api, env.provider_id)}"
        f" provider={connection(env.provider_api, env.consumer_id)}; ForeignCluster APIServer="
        f"{api_server.get('status')} networking[{net}]; virtual Node Ready={virtual}"
    )
    if not provider:
        return signals
    # The provider's node (where its gateway runs) and the address Liqo publishes for the gateway server there.
    servers = items(
        env.provider_api, "networking.liqo.io", "gatewayservers", tenant_ns(env.provider_api, env.consumer_id)
    )
    endpoints = [((s.get("status") or {}).get("endpoint") or {}).get("addresses") for s in servers]
    nodes = _node_ready(env.provider_api, "metadata.name!=" + env.consumer_id)  # not a virtual Node for the consumer
    return f"{signals}; provider node Ready={nodes}; GatewayServer addresses={endpoints}"


def _node_ready(api: k8s.ApiClient, selector: str) -> str:
    """The Ready condition (status and reason) of the Nodes the field selector picks."""
    found = k8s.CoreV1Api(api).list_node(field_selector=selector).items
    ready = [
        next((f"{c.status} {c.reason}" for c in (n.status.conditions or []) if c.type == "Ready"), "?")  # type: ignore[union-attr]
        for n in found
    ]
    return ",".join(ready) or "none"


def _ready_again(env: RealEnv, ns: str) -> tuple[float, list[str]]:
    """Wait for the peering to be Ready; the seconds it took, and each change on the way of its Ready reason
    and message and of Liqo's signals (_liqo_signals): what Ready waited for, of Liqo's."""
    started = time.monotonic()
    seen: list[tuple[str, str]] = []

    def ready() -> bool:
        status = env.peerings.status(ns, NAME)
        cond: dict[str, Any] = next((c for c in status.get("conditions") or [] if c["type"] == "Ready"), {})
        now = f"{cond.get('reason')}: {cond.get('message')} | {_liqo_signals(env)}"
        if not seen or seen[-1][1] != now:
            seen.append((f"+{time.monotonic() - started:.1f}s", now))
        return status.get("peerStatus") == "ready"

    try:
        wait_for("the peering to be Ready again by itself", ready, timeout=180)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\nReady on the way: {seen}\n{env.diagnostics()}") from None
    return time.monotonic() - started, [f"{at} {what}" for at, what in seen]


def test_provider_api_server_stopped_is_reported_and_the_real_liqo_peering_recovers(
    rcase: tuple[RealEnv, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """The provider's kube-apiserver stopped (SIGKILL) for DOWN_SECONDS against Liqo itself: first while the peering
    is establishing (held in networking by the partition of the tunnel), then, once it is Ready, again. While
    it is down the status says ProviderUnreachable, naming the server; once it is back the peering is Ready by
    itself (no spec change, no operator restart), every object of the peering on both clusters is the one
    there was before (same uids; per Liqo kind as many as before, none duplicated or missing), and unpeering
    leaves nothing. Meanwhile Liqo's own components lose the provider too (the consumer's virtual kubelet,
    the gateways, everything of Liqo's on the provider): what Ready waited for, and the restarts of Liqo's
    containers, are written to the test's log; how long each step took is printed, not asserted."""
    env, ns = rcase
    apis = {"consumer": env.consumer_api, "provider": env.provider_api}

    # Establishing: the networking objects are there on both sides and the tunnel is withheld.
    env.set_connection_fault("Never")
    env.peerings.create(ns, NAME, env.spec())
    wait_for(
        "the peering to wait for the tunnel",
        lambda: (
            (env.peerings.condition(ns, NAME, "Ready") or {}).get("reason")
            in ("WaitingForConnection", "GatewayUnreachable")
        ),
        timeout=120,
    )
    early = object_uids(env, missing_ok=True)
    assert any("/gatewayservers/" in key for key in early) and any("/gatewayclients/" in key for key in early)
    restarts = _liqo_restarts(env)

    def outage(phase: str, after_restart: Callable[[], None] = lambda: None) -> None:
        """The provider down DOWN_SECONDS, then Ready again by itself: what Ready waited for goes to the log."""
        detected = provider_down(env.pair["provider"], env.peerings, ns, NAME)
        after_restart()
        took, seen = _ready_again(env, ns)
        sys.stderr.write(f"\nReady after the outage ({phase}):\n" + "\n".join(seen) + "\n")
        with capsys.disabled():
            print(
                f"\nBENCH real Liqo ({install_kind()}): provider API server stopped ({phase}) -> ProviderUnreachable:"
                f" {detected:.1f}s; started again -> Ready: {took:.1f}s"
            )

    outage("establishing", after_restart=lambda: env.set_connection_fault(None))
    objects = object_uids(env)
    assert {key: objects.get(key) for key in early} == early, "an object of the peering was re-created"
    assert_one_of_each(env)

    # Ready.
    counts = {side: inventory.liqo_objects(api) for side, api in apis.items()}
    outage("ready")
    after = _liqo_restarts(env)
    changed = {pod: n - restarts.get(pod, 0) for pod, n in after.items() if n != restarts.get(pod, 0)}
    sys.stderr.write(f"\nLiqo's container restarts during the two outages: {changed}\n")
    assert object_uids(env) == objects, "an object of the peering was re-created"
    assert {side: inventory.liqo_objects(api) for side, api in apis.items()} == counts

    # And unpeering still leaves nothing (the provider's garbage collector deletes the Tenant's RoleBindings).
    # Right after the outage it waits for Liqo: its crd-replicator keeps the consumer's ResourceSlice (its
    # finalizer) until its informer on the provider, in client-go's backoff since the outage, relists
    # (docs/liqo-behaviour.md).
    took = unpeer(env, ns, NAME)
    with capsys.disabled():
        print(f"\nBENCH real Liqo ({install_kind()}): provider API server stopped twice -> unpeered: {took:.1f}s")


# --- the consumer's API server and etcd restarted (the test is in the class) -----------------------------------
OK_CONDITIONS = ("Established", "Ready", "None")  # Liqo's ForeignCluster condition statuses that are no fault


def _bench(capsys: pytest.CaptureFixture[str], text: str) -> None:
    with capsys.disabled():  # printed in CI's output
        print(f"\nBENCH real Liqo ({install_kind()}): {text}")


def _resources_follow(env: RealEnv, ns: str, resources: dict[str, str]) -> None:
    """spec.offloading.resources set to `resources`: the consumer's ResourceSlice carries them, Liqo replicates
    it to the provider, the virtual Node offers them, observedGeneration follows and the peering is Ready."""
    env.peerings.patch(ns, NAME, {"spec": {"offloading": {"resources": resources}}})
    c_ns, p_ns = tenant_ns(env.consumer_api, env.provider_id), tenant_ns(env.provider_api, env.consumer_id)

    def updated(api: k8s.ApiClient, where: str) -> bool:
        rs = get(api, "authentication.liqo.io", "resourceslices", where, env.provider_id) or {}
        return (rs.get("spec") or {}).get("resources") == resources

    wait_for("the consumer's ResourceSlice to carry the new resources", lambda: updated(env.consumer_api, c_ns), 60)
    # Liqo's CRD replicator copies it; after an API server restart its watch comes back on client-go's
    # backoff, which can take most of a minute more than the components take to come back.
    wait_for("Liqo to replicate it to the provider", lambda: updated(env.provider_api, p_ns), 120)

    def offered() -> bool:
        # The virtual Node (named after the provider) offers what the provider accepted. Waiting for it
        # also keeps the next test from starting while the virtual kubelet is still taking the change.
        nodes = k8s.CoreV1Api(env.consumer_api).list_node(field_selector=f"metadata.name={env.provider_id}")
        status = nodes.items[0].status if nodes.items else None
        allocatable = (status.allocatable if status else None) or {}
        return all(allocatable.get(name) == value for name, value in resources.items())

    wait_for("the virtual Node to offer the new resources", offered, 120)
    generation = env.peerings.get(ns, NAME)["metadata"]["generation"]  # type: ignore[index]
    wait_for(
        "observedGeneration to follow",
        lambda: env.peerings.status(ns, NAME).get("observedGeneration") == generation,
    )
    env.peerings.wait_status(ns, NAME, "ready", timeout=120)


def _lease_places(env: RealEnv) -> list[tuple[str, str | None]]:
    """Where Liqo's components on the consumer hold Leases: (namespace, name or None for all of them). With the
    chart's one replica each, only the virtual kubelet elects itself (two Leases in the tenant namespace; the
    controller manager, IPAM, webhook and gateway do only with more replicas, in these namespaces); and the
    virtual Node's heartbeat."""
    return [("liqo", None), (tenant_ns(env.consumer_api, env.provider_id), None), ("kube-node-lease", env.provider_id)]


def _leases(env: RealEnv) -> dict[str, dict[str, Any]]:
    """Those Leases' specs, by namespace/name."""
    found: dict[str, dict[str, Any]] = {}
    coordination = k8s.CoordinationV1Api(env.consumer_api)
    for ns, name in _lease_places(env):
        selector = f"metadata.name={name}" if name else None
        listed: Any = coordination.list_namespaced_lease(ns, field_selector=selector, _preload_content=False)
        for lease in listed.json()["items"]:
            found[f"{ns}/{lease['metadata']['name']}"] = lease.get("spec") or {}
    return found


def _live_leases(env: RealEnv) -> set[str]:
    """The Leases renewed within their duration: held by a running component (a gone one leaves its Lease)."""
    now = datetime.now(UTC)
    return {
        key
        for key, spec in _leases(env).items()
        if spec.get("renewTime")
        and (now - datetime.fromisoformat(spec["renewTime"])).total_seconds()
        < int(spec.get("leaseDurationSeconds") or 40)
    }


def _liqo_not_back(env: RealEnv, ns: str, back: datetime, leases: set[str]) -> list[str]:
    """What has not yet shown it is back since `back`, the API server's return: each live Lease renewed since,
    each of Liqo's Pods on the consumer Ready, each side's Connection Connected, every condition of the
    consumer's ForeignCluster fine, the virtual Node Ready, the peering Ready and its mirror of the
    ForeignCluster Healthy. [] once everything has."""
    waiting = []
    renewed = _leases(env)
    for key in sorted(leases):
        at = (renewed.get(key) or {}).get("renewTime")
        if not at or datetime.fromisoformat(at) < back:
            waiting.append(f"Lease {key} not renewed")
    for pod_ns in ("liqo", tenant_ns(env.consumer_api, env.provider_id)):
        listed: Any = k8s.CoreV1Api(env.consumer_api).list_namespaced_pod(pod_ns, _preload_content=False)
        for pod in listed.json()["items"]:
            state = pod.get("status") or {}
            if state.get("phase") in ("Succeeded", "Failed"):  # a Job's, done: never Ready again
                continue
            if not any(c["type"] == "Ready" and c["status"] == "True" for c in state.get("conditions") or []):
                waiting.append(f"Pod {pod_ns}/{pod['metadata']['name']} not Ready")
    for side, api, peer in (
        ("consumer", env.consumer_api, env.provider_id),
        ("provider", env.provider_api, env.consumer_id),
    ):
        values = [
            str((c.get("status") or {}).get("value"))
            for c in items(api, "networking.liqo.io", "connections", tenant_ns(api, peer))
        ]
        if values != ["Connected"]:
            waiting.append(f"{side} Connection {values}")
    for key, value in _foreign_cluster_conditions(env).items():
        if value.split()[0] not in OK_CONDITIONS:
            waiting.append(f"{key} {value}")
    node = _node_conditions(env).get("virtual Node Ready", "missing")
    if not node.startswith("True"):
        waiting.append(f"virtual Node Ready {node}")
    status = env.peerings.status(ns, NAME)
    if status.get("peerStatus") != "ready":
        waiting.append(f"LiqoPeering {status.get('peerStatus')}")
    mods = (status.get("foreignCluster") or {}).get("modules") or {}
    unhealthy = [
        m for m in ("networking", "authentication", "offloading") if (mods.get(m) or {}).get("health") != "Healthy"
    ]
    if unhealthy:
        waiting.append(f"LiqoPeering mirror unhealthy: {unhealthy}")
    return waiting


def _wait_liqo_back(env: RealEnv, ns: str, back: datetime, leases: set[str], what: str) -> list[str]:
    """Wait until _liqo_not_back is empty; what it said on the way, each change with its time."""
    started = time.monotonic()
    seen: list[tuple[float, list[str]]] = []

    def done() -> bool:
        now = _liqo_not_back(env, ns, back, leases)
        if not seen or seen[-1][1] != now:
            seen.append((time.monotonic() - started, now))
        return not now

    try:
        wait_for(f"Liqo on the consumer to be {what}", done, timeout=180, interval=1)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\non the way: {seen}\n{env.diagnostics()}") from None
    return [f"+{at:.1f}s waiting for {what}" for at, what in seen]


def _conditions(prefix: str, conditions: list[dict[str, Any]]) -> dict[str, str]:
    """'<prefix> <type>' -> '<status> since <lastTransitionTime>'."""
    return {f"{prefix} {c['type']}": f"{c.get('status')} since {c.get('lastTransitionTime')}" for c in conditions}


def _foreign_cluster_conditions(env: RealEnv) -> dict[str, str]:
    """The consumer's ForeignCluster's conditions, its own and each module's."""
    status = (get(env.consumer_api, "core.liqo.io", "foreignclusters", None, env.provider_id) or {}).get("status") or {}
    found = _conditions("ForeignCluster", status.get("conditions") or [])
    for module, value in (status.get("modules") or {}).items():
        found |= _conditions(f"ForeignCluster {module}", (value or {}).get("conditions") or [])
    return found


def _node_conditions(env: RealEnv) -> dict[str, str]:
    listed: Any = k8s.CoreV1Api(env.consumer_api).list_node(
        field_selector=f"metadata.name={env.provider_id}", _preload_content=False
    )
    nodes = listed.json()["items"]
    return _conditions("virtual Node", (nodes[0].get("status") or {}).get("conditions") or []) if nodes else {}


def _liqo_snapshot(env: RealEnv, ns: str) -> dict[str, str]:
    """What a flap of Liqo's would change: the ForeignCluster's and the virtual Node's conditions (status and
    last transition), who holds each Lease of Liqo's on the consumer, and the LiqoPeering's conditions."""
    leases = {f"Lease {key}": f"held by {spec.get('holderIdentity')}" for key, spec in _leases(env).items()}
    peering = _conditions("LiqoPeering", env.peerings.status(ns, NAME).get("conditions") or [])
    return _foreign_cluster_conditions(env) | _node_conditions(env) | leases | peering


def _what_liqo_did(env: RealEnv, ns: str, snapshot: dict[str, str], restarts: dict[str, int], seen: list[str]) -> str:
    """For the test's log: Liqo's way back, what of _liqo_snapshot changed, and its containers' restarts."""
    now, count = _liqo_snapshot(env, ns), _liqo_restarts(env)
    changed = [
        f"{key}: {snapshot.get(key)} -> {now.get(key)}"
        for key in sorted(set(snapshot) | set(now))
        if snapshot.get(key) != now.get(key)
    ]
    restarted = {pod: n - restarts.get(pod, 0) for pod, n in count.items() if n != restarts.get(pod, 0)}
    lines = ["Liqo on the way back after the consumer's restarts:", *seen]
    lines += ["what of Liqo's (and the LiqoPeering's conditions) changed:", *(changed or ["nothing"])]
    lines += [f"Liqo's container restarts: {restarted}"]
    for key in restarted:
        lines += _last_words(env, key)
    return "\n" + "\n".join(lines) + "\n"


def _last_words(env: RealEnv, key: str, tail: int = 15) -> list[str]:
    """Why the containers of a Pod (side/namespace/name, as _liqo_restarts names it) last ended: their last
    termination and the end of the log of the instance before."""
    side, ns, name = key.split("/")
    core = k8s.CoreV1Api(env.consumer_api if side == "consumer" else env.provider_api)
    pod: Any = core.read_namespaced_pod(name, ns, _preload_content=False)
    found = []
    for container in (pod.json().get("status") or {}).get("containerStatuses") or []:
        ended = (container.get("lastState") or {}).get("terminated")
        if not ended:
            continue
        found.append(f"{key} {container['name']} ended: {ended}")
        with contextlib.suppress(ApiException):
            log: Any = core.read_namespaced_pod_log(
                name, ns, container=container["name"], previous=True, tail_lines=tail, _preload_content=False
            )
            found += [f"  {line}" for line in log.data.decode(errors="replace").splitlines()]
    return found


# --- force-delete once the provider is gone for good (last in the module: the provider is revived after) -------
UNREACHABLE = "liqo.io/foreign-cluster-permanently-unreachable"  # Liqo's pkg/consts, as liqoctl force unpeer sets it


def _consumer_liqo_stuck(env: RealEnv) -> dict[str, list[str]]:
    """Liqo objects on the consumer being deleted and held by a finalizer: what would wait on the provider."""
    stuck: dict[str, list[str]] = {}
    for kind, objs in inventory.liqo_items(env.consumer_api).items():
        names = [
            f"{o['metadata'].get('namespace') or ''}/{o['metadata']['name']} {o['metadata'].get('finalizers')}"
            for o in objs
            if o["metadata"].get("deletionTimestamp")
        ]
        if names:
            stuck[kind] = names
    return stuck


@pytest.mark.pairlast
def test_force_delete_once_the_provider_is_gone_for_good(
    rcase: tuple[RealEnv, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A Ready peering whose provider cluster is then destroyed for good (its API server killed, its node's
    daemons stopped and its Pods frozen: nothing of it answers again), deleted with
    peering.liqo-operator.io/force-delete, as `liqoctl force unpeer` does it: the provider's ForeignCluster is
    marked permanently unreachable, so that Liqo's CRD replicator and the virtual node's drain stop waiting for
    the provider, and the consumer is cleaned: the LiqoPeering, its tenant namespace, the virtual node and every
    Liqo object of the peering gone, none left held by a finalizer. The provider's API server comes back for the
    leak scan; its side of the peering stays, as nobody could unpeer it, so the test runs after every other one
    of its tier (pairlast)."""
    env, ns = rcase
    env.peerings.create(ns, NAME, env.spec())
    env.peerings.wait_status(ns, NAME, "ready", timeout=240)
    c_ns = tenant_ns(env.consumer_api, env.provider_id)
    core = k8s.CoreV1Api(env.consumer_api)
    try:
        with operator_support.cluster_gone(env.pair["provider"]):
            env.peerings.wait_reason(ns, NAME, "ProviderUnreachable", timeout=60)
            deleted = time.monotonic()
            env.peerings.patch(
                ns, NAME, {"metadata": {"annotations": {"peering.liqo-operator.io/force-delete": "true"}}}
            )
            env.peerings.delete(ns, NAME)
            try:
                env.peerings.wait_gone(ns, NAME, timeout=240)
            except AssertionError as exc:
                raise AssertionError(f"{exc}\nstuck: {_consumer_liqo_stuck(env)}\n{env.diagnostics()}") from None
            took = time.monotonic() - deleted
            fc = get(env.consumer_api, "core.liqo.io", "foreignclusters", None, env.provider_id)
            assert fc is None or (fc["metadata"].get("annotations") or {}).get(UNREACHABLE) == "true", fc
            assert not core.list_namespace(field_selector=f"metadata.name={c_ns}").items, c_ns
            wait_for(
                "the virtual Node to be gone",
                lambda: not core.list_node(label_selector="liqo.io/type=virtual-node").items,
                timeout=90,
            )
            wait_for("the virtual kubelet to stop", lambda: env.pair.virtual_kubelets() == 0, timeout=60)
            last: list[Any] = [None]

            def consumer_clean() -> bool:
                left = inventory.liqo_names(env.consumer_api, lambda o: liqos_own(o) or o["kind"] == "ForeignCluster")
                last[0] = (left, _consumer_liqo_stuck(env))
                return last[0] == ({}, {})

            try:
                wait_for("nothing of the peering left on the consumer", consumer_clean, timeout=60)
            except AssertionError as exc:
                raise AssertionError(f"{exc}\nleft, held by a finalizer: {last[0]}") from None
            with capsys.disabled():
                print(f"\nBENCH real Liqo ({install_kind()}): provider gone for good -> force-deleted: {took:.1f}s")
    finally:
        env.gone.add("provider")  # the cleanup checks the consumer only
