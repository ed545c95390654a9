"""The chart's NetworkPolicy, enforced: on the consumer's real node, kube-router's network policy controller
(testenv.netpol) enforces it on the operator's Pod, installed by `helm install` with networkPolicy enabled.

Ingress: a Pod the policy names (metricsFrom) scrapes the metrics port but not the health port; any other
Pod reaches neither; the kubelet's probes (from the node) still pass. Egress: the operator reaches its
own API server and the provider's, listed as CIDRs and ports, so a peering turns Ready, and without the
provider's CIDR it is ProviderUnreachable. Without the policy the other Pod scrapes: what refused it was
the policy, not the Pod's network.

Both API servers listen on the host's address on the LAN, so the CIDRs are the same /32 and the ports tell
them apart. CoreDNS is a process on node 0 (testenv.localk8s), so DNS is that address too.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hack.crdgen import CRD_NAME, SET_CRD_NAME
from testenv import kube as k
from testenv.leakscan import LeakScan
from testenv.liqo_env.pytest_plugin import LiqoClusters, StandInProcess
from testenv.localk8s.images import Image
from testenv.localk8s.pods import logs, python_pod
from testenv.netpol import PolicyEnforcer
from testenv.operator_release import FULLNAME, RELEASE, RELEASE_NS, Release
from testenv.operator_support import SECRET, Peerings, api_client, wait_for

PEERING_NS = "e2e-netpol"
NAME = "provider"
NAMED = {"netpol-e2e": "scraper"}  # the Pods the policy's metricsFrom names
UNNAMED = {"netpol-e2e": "other"}
METRICS_PORT, HEALTH_PORT = 8080, 8081  # the chart's metrics.port and health.port
# The chart's CRDs, kept on uninstall, and kopf's, which Helm never deletes: removed after the module so
# that the next chart install (test_operator_pod.py) owns them itself.
KEPT_CRDS = (CRD_NAME, SET_CRD_NAME, "clusterkopfpeerings.kopf.dev", "kopfpeerings.kopf.dev")

# Connects to each port of `host` in turn and prints {port: outcome} as JSON: "ok" (an HTTP answer),
# "refused" or "timeout". With `until_ok`, the first port is tried again until it answers: the enforcer
# allows a new Pod once it has seen its address.
SCRAPE = """
import json, socket, time, urllib.error, urllib.request
host, ports, until_ok = {host!r}, {ports!r}, {until_ok!r}
def attempt(port):
    try:
        urllib.request.urlopen(f"http://{{host}}:{{port}}/metrics", timeout=5).read()
        return "ok"
    except urllib.error.HTTPError:
        return "ok"
    except urllib.error.URLError as e:
        reason = e.reason
    except OSError as e:
        reason = e
    if isinstance(reason, ConnectionRefusedError):
        return "refused"
    if isinstance(reason, (TimeoutError, socket.timeout)):
        return "timeout"
    return f"error: {{reason!r}}"
results = {{}}
deadline = time.monotonic() + 60
for port in ports:
    results[port] = attempt(port)
    while until_ok and port == ports[0] and results[port] != "ok" and time.monotonic() < deadline:
        time.sleep(0.5)
        results[port] = attempt(port)
print(json.dumps(results))
"""


@dataclass
class Suite(Release):
    lc: LiqoClusters
    standin: StandInProcess
    peerings: Peerings
    python: Image
    enforcer: PolicyEnforcer

    def policy_values(self, providers: bool = True) -> list[str]:
        consumer, provider = self.lc["consumer"], self.lc["provider"]
        (node,) = consumer.node_specs()
        lan = f"{consumer.host}/32"
        values = [
            "networkPolicy.enabled=true",
            f"networkPolicy.apiServer.cidrs={{{lan}}}",
            f"networkPolicy.apiServer.ports={{{consumer.apiserver_port}}}",
            f"networkPolicy.dns.to[0].ipBlock.cidr={node.ip}/32",
            f"networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name={PEERING_NS}",
            *(f"networkPolicy.metricsFrom[0].podSelector.matchLabels.{key}={value}" for key, value in NAMED.items()),
        ]
        if providers:
            values += [
                f"networkPolicy.providers.cidrs={{{lan}}}",
                f"networkPolicy.providers.ports={{{provider.apiserver_port}}}",
            ]
        return values

    def operator_pod(self) -> dict[str, Any]:
        (pod,) = self.wait_ready(1, "the operator Pod to be ready", timeout=180)
        return pod

    def enforced(self, pod: dict[str, Any]) -> None:
        """Until kube-router applies a policy to the operator's Pod."""
        name = pod["metadata"]["name"]
        try:
            wait_for(
                f"kube-router to apply the NetworkPolicy to {name}",
                lambda: self.enforcer.applies(RELEASE_NS, name, FULLNAME),
                timeout=60,
            )
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.enforcer.log()}") from None

    def scrape(self, labels: dict[str, str], ports: list[int], until_ok: bool = False) -> dict[int, str]:
        """What a new Pod with `labels` in PEERING_NS gets from the operator Pod's `ports`."""
        pod_ip = self.operator_pod()["status"]["podIP"]
        script = SCRAPE.format(host=pod_ip, ports=ports, until_ok=until_ok)
        pod = python_pod(f"scrape-{uuid.uuid4().hex[:6]}", self.python.ref, script, labels=labels)
        name = pod["metadata"]["name"]
        self.kc.create(k.POD, pod, PEERING_NS)
        try:
            phase = wait_for(f"Pod {name} to finish", lambda: self._finished(name), timeout=150)
            log = logs(self.kc, PEERING_NS, name)
            assert phase == "Succeeded", f"{name} {phase}:\n{log}"
        finally:
            self.kc.delete(k.POD, name, PEERING_NS)
        results = {int(port): outcome for port, outcome in json.loads(log.strip().splitlines()[-1]).items()}
        print(f"\n{labels} -> {pod_ip}: {results}")
        return results

    def _finished(self, name: str) -> str | None:
        phase = ((self.kc.get(k.POD, name, PEERING_NS) or {}).get("status") or {}).get("phase")
        return str(phase) if phase in ("Succeeded", "Failed") else None


@pytest.fixture(scope="module")
def suite(
    liqo_node_clusters: LiqoClusters, node_images: dict[str, Image], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Suite]:
    lc = liqo_node_clusters
    workdir = tmp_path_factory.mktemp("netpol")
    (node,) = lc["consumer"].node_specs()
    enforcer = PolicyEnforcer(lc["consumer"], node, workdir).start()
    standin = StandInProcess(lc, workdir / "liqo-standin.log")
    peerings = Peerings(api_client(lc["consumer"].kubeconfig))
    peerings.make_namespace(PEERING_NS)
    # The provider's admin kubeconfig: its server is the provider's API server on the LAN.
    peerings.put_kubeconfig_secret(PEERING_NS, SECRET, Path(lc["provider"].kubeconfig).read_bytes())
    suite = Suite(
        cluster=lc["consumer"],
        image=node_images["operator"],
        liqo_namespace=lc.namespace,
        lc=lc,
        standin=standin,
        peerings=peerings,
        python=node_images["python-base"],
        enforcer=enforcer,
    )
    try:
        yield suite
    finally:
        try:
            _clean_up(suite)
        finally:
            standin.stop()
            enforcer.stop()
    assert not enforcer.leftovers()


@pytest.fixture(autouse=True)
def scanned(suite: Suite, leak_scan: LeakScan) -> Iterator[None]:
    """After each test: the operator Pods' logs, and the clusters' Secrets, Events and statuses, for the run's
    leak scan (tests/e2e/test_zz_no_leaks.py)."""
    yield
    suite.scan_logs(leak_scan)
    leak_scan.collect({side: api_client(suite.lc[side].kubeconfig) for side in ("consumer", "provider")})


def _clean_up(suite: Suite) -> None:
    """Unpeered while the operator runs, uninstalled, the kept CRDs and the namespaces deleted."""
    if suite.kc.get(k.DEPLOYMENT, FULLNAME, RELEASE_NS) is not None:
        suite.peerings.delete(PEERING_NS, NAME)
        suite.peerings.wait_gone(PEERING_NS, NAME, timeout=120)
        suite.helm("uninstall", RELEASE, "--namespace", RELEASE_NS, "--wait")
    if suite.kc.get(k.CRD, CRD_NAME) is not None and suite.peerings.get(PEERING_NS, NAME) is not None:
        suite.peerings.patch(PEERING_NS, NAME, {"metadata": {"finalizers": None}})
    for crd in KEPT_CRDS:
        suite.kc.delete(k.CRD, crd)
    for namespace in (PEERING_NS, RELEASE_NS):
        suite.kc.delete(k.NAMESPACE, namespace)
    gone = [(k.CRD, crd) for crd in KEPT_CRDS] + [(k.NAMESPACE, PEERING_NS), (k.NAMESPACE, RELEASE_NS)]
    wait_for("the CRDs and the namespaces gone", lambda: all(suite.kc.get(*o) is None for o in gone), timeout=120)


def test_the_operator_pod_runs_under_the_enforced_policy(suite: Suite) -> None:
    out = suite.helm("install", RELEASE, *suite.install_args(*suite.policy_values()), "--create-namespace")
    assert "STATUS: deployed" in out, out
    (policy,) = suite.kc.list(k.Res("networking.k8s.io", "v1", "networkpolicies"), RELEASE_NS)
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    pod = suite.operator_pod()
    suite.enforced(pod)
    # Flows the Pod opened before kube-router saw it were let through (conntrack): forgotten here, each goes
    # through the policy again with its next packet, so that what works from now on is what the policy allows.
    suite.enforcer.forget_flows(pod["status"]["podIP"])


def test_a_peering_turns_ready_through_the_policy(suite: Suite) -> None:
    """Egress to the consumer's API server (every watch and write) and to the provider's, as the policy
    lists them; the kubelet's probes from the node keep the Pod ready."""
    suite.peerings.create(PEERING_NS, NAME, {"remoteKubeconfigSecretRef": {"name": SECRET}, "timeout": "3m"})
    try:
        status = suite.peerings.wait_status(PEERING_NS, NAME, "ready", timeout=180)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{suite.operator_logs()}\n{suite.enforcer.log()}") from None
    assert status["remoteClusterID"] == suite.lc.ids["provider"]
    (pod,) = suite.pods()
    (container,) = pod["status"]["containerStatuses"]
    assert container["ready"] and container["restartCount"] == 0, container


def test_only_the_named_pods_reach_the_metrics_port(suite: Suite) -> None:
    named = suite.scrape(NAMED, [METRICS_PORT, HEALTH_PORT], until_ok=True)
    assert named[METRICS_PORT] == "ok", named
    assert named[HEALTH_PORT] in ("refused", "timeout"), named  # healthFrom names no one
    unnamed = suite.scrape(UNNAMED, [METRICS_PORT, HEALTH_PORT])
    assert set(unnamed.values()) <= {"refused", "timeout"}, unnamed


def test_a_provider_left_out_of_the_policy_is_unreachable(suite: Suite) -> None:
    suite.helm("upgrade", RELEASE, *suite.install_args(*suite.policy_values(providers=False)))
    # The rules kube-router wrote for the egress to the provider's port are gone: new connections to it
    # are refused.
    port = str(suite.lc["provider"].apiserver_port)
    wait_for(
        "kube-router to drop the provider's port from the policy",
        lambda: f"--dport {port}" not in suite.enforcer.rules(),
        timeout=60,
    )
    suite.enforcer.forget_flows(suite.operator_pod()["status"]["podIP"])
    suite.peerings.wait_reason(PEERING_NS, NAME, "ProviderUnreachable", timeout=180)

    suite.helm("upgrade", RELEASE, *suite.install_args(*suite.policy_values()))
    suite.peerings.wait_status(PEERING_NS, NAME, "ready", timeout=180)


def test_without_the_policy_the_other_pod_scrapes(suite: Suite) -> None:
    """The same Pod, the same enforcer: what refused the other Pod was the policy."""
    (pod,) = suite.pods()
    suite.helm("upgrade", RELEASE, *suite.install_args("networkPolicy.enabled=false"))
    assert not suite.kc.list(k.Res("networking.k8s.io", "v1", "networkpolicies"), RELEASE_NS)
    name = pod["metadata"]["name"]
    wait_for(
        f"kube-router to lift the policy from {name}",
        lambda: not suite.enforcer.applies(RELEASE_NS, name, FULLNAME),
        timeout=60,
    )
    assert suite.pods()[0]["metadata"]["name"] == name  # not rolled: the same Pod
    unnamed = suite.scrape(UNNAMED, [METRICS_PORT, HEALTH_PORT], until_ok=True)
    assert unnamed == {METRICS_PORT: "ok", HEALTH_PORT: "ok"}, unnamed
