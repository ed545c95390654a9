"""Two replicas of the operator against Liqo itself: the project's chart with
ha.enabled and two replicas (kopf peering) on the consumer of the real-Liqo pair (`real_liqo`: Liqo's own chart
on two clusters with a node each, testenv.liqo_chart), the operator's image (`make images`) loaded into the
consumer's node. Marker `realliqo`, tier `liqo`.

A module of its own: tests/e2e/test_real_liqo.py runs the operator as a process for its whole module, which
here would act beside the replicas. The stand-in suite's HA tests (tests/e2e/test_operator_pod.py) share the
machinery (testenv.operator_release); the end-state checks are the real-Liqo suite's (testenv.real_pair).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from testenv import kube as k
from testenv.helm import run_helm
from testenv.leakscan import LeakScan
from testenv.liqo_install import LiqoInstall, install_kind
from testenv.localk8s.images import Image
from testenv.operator_release import RELEASE, RELEASE_NS, SELECTOR, Handover, Release, ha_values
from testenv.operator_support import GROUP, PLURAL, VERSION, Peerings, api_client, wait_for
from testenv.real_pair import (
    RealPair,
    assert_one_of_each,
    case_namespace,
    object_uids,
    unpeer,
    wait_liqo_done,
)
from testenv.trigger import When, named

pytestmark = [pytest.mark.realliqo]

NAME = "provider"
LIFETIME = 15  # ha.peeringLifetime: seconds a replica's entry in the kopf peering object stays valid
LIQO_NAMESPACE = "liqo"  # where Liqo's chart is installed (testenv.liqo_chart)


def test_two_replicas_hand_over_mid_peering_with_real_liqo(
    real_liqo: LiqoInstall,
    node_images: dict[str, Image],
    leak_scan: LeakScan,
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The chart with two replicas; one stands by. A LiqoPeering is created and the active replica's process is
    SIGKILLed the moment its Tenant appears on the provider (mid-way: the stages run side by side, so the
    network is being set up, authentication has begun, offloading has not).
    A replica acts again (the standby, or the killed container restarted by the kubelet, whichever kopf
    peering ranks first), the peering becomes Ready against Liqo, every object of it exists once on both
    clusters (those made before the kill not re-created), and no write on either cluster came from a replica
    that was not acting at the time (the consumer's audit log names each write's Pod; on the provider the
    acting windows tell). Deleted, nothing of it is left on either cluster; the chart is uninstalled."""
    if install_kind() != "chart":
        pytest.skip("the chart's Pods need a node: LIQO_INSTALL=processes has none")
    consumer_api = api_client(real_liqo["consumer"].kubeconfig)
    env = RealPair(real_liqo, Peerings(consumer_api), consumer_api, api_client(real_liqo["provider"].kubeconfig))
    release = Release(real_liqo["consumer"], node_images["operator"], LIQO_NAMESPACE)
    started = time.monotonic()
    with _installed(release, env, leak_scan):
        installed = time.monotonic() - started
        ns = case_namespace(env, request.node.name)
        h = Handover(release, LIFETIME)
        assert not [t for t in _tenants(env) if t["metadata"]["name"] == env.consumer_id], "a Tenant left over"

        provider = k8s.CustomObjectsApi(env.provider_api)
        tenants = ("authentication.liqo.io", "v1beta1", "tenants")
        created = time.monotonic()
        with When(
            named(env.consumer_id), lambda: h.signal(signal.SIGKILL), provider.list_cluster_custom_object, *tenants
        ) as when:
            env.peerings.create(ns, NAME, env.spec())
            when.wait(timeout=120)
        killed = time.monotonic()
        early = object_uids(env, missing_ok=True)
        assert any("/tenants/" in key for key in early) and not any("/virtualnodes/" in key for key in early), early

        h.wait_taken_over()
        try:
            env.peerings.wait_status(ns, NAME, "ready", timeout=240)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{release.diagnosis()}\n{env.diagnostics()}") from None
        ready = time.monotonic()
        leader = h.wait_restarted(elsewhere=real_liqo["provider"].audit_log)

        uids = object_uids(env)
        assert {key: uids.get(key) for key in early} == early, "an object made before the kill was re-created"
        assert_one_of_each(env)
        leak_scan.collect(env.apis)  # the peering's Events and status, before it goes

        gone = unpeer(env, ns, NAME)
        wait_liqo_done(env)
        env.peerings.core.delete_namespace(ns)
        release.scan_logs(leak_scan)
        uninstalling = time.monotonic()
        release.helm("uninstall", RELEASE, "--namespace", RELEASE_NS, "--wait")
        wait_for("the operator Pods to be gone", lambda: not release.kc.list(k.POD, RELEASE_NS, SELECTOR), timeout=120)
        uninstalled = time.monotonic() - uninstalling
    with capsys.disabled():
        print(
            f"\nBENCH real Liqo HA: active replica SIGKILLed mid-peering -> a replica acts: {h.handover:.1f}s"
            f" (the {h.taker}; peering lifetime {LIFETIME} s; the restarted container announced itself after"
            f" {h.seen['announced']:.1f}s; then {leader} acted); create -> kill {killed - created:.1f}s,"
            f" kill -> Ready {ready - killed:.1f}s, delete -> gone {gone:.1f}s; install -> one replica acting"
            f" {installed:.1f}s, uninstall {uninstalled:.1f}s"
        )


def _tenants(env: RealPair) -> list[dict[str, Any]]:
    listed: Any = k8s.CustomObjectsApi(env.provider_api).list_cluster_custom_object(
        "authentication.liqo.io", "v1beta1", "tenants"
    )
    return list(listed["items"])


@contextlib.contextmanager
def _installed(release: Release, env: RealPair, leak_scan: LeakScan) -> Iterator[None]:
    """The release with two replicas, both ready. After a failure: the Pods' logs and the clusters' Secrets,
    Events and statuses go to the run's leak scan, every LiqoPeering is deleted while the replicas still run
    (so that its finalizer goes; released by hand if they cannot), and the release is uninstalled."""
    release.cluster.load_image(release.image.archive)
    try:
        # An earlier module of the tier applied the operator's CRDs from crds/ (install_crd): the release takes
        # them over, as it would CRDs a user applied before installing the chart.
        args = release.install_args(*ha_values(LIFETIME), wait=False)
        release.helm("install", RELEASE, *args, "--create-namespace", "--take-ownership")
        release.wait_one_acting(2)
        yield
    except BaseException:
        sys.stderr.write(f"\n{release.diagnosis()}\n{env.diagnostics()}\n")
        release.scan_logs(leak_scan)
        leak_scan.collect(env.apis)
        listed: Any = env.peerings.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)
        for item in listed["items"]:
            namespace, name = item["metadata"]["namespace"], item["metadata"]["name"]
            env.peerings.delete(namespace, name)
            try:
                env.peerings.wait_gone(namespace, name, timeout=180)
            except AssertionError:
                env.peerings.patch(namespace, name, {"metadata": {"finalizers": None}})
            env.peerings.core.delete_namespace(namespace)
        run_helm("uninstall", RELEASE, "--namespace", RELEASE_NS, "--wait", kubeconfig=release.kubeconfig, check=False)
        raise
