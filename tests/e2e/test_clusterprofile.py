"""A LiqoPeering that reaches its provider through a ClusterProfile (spec.remoteClusterProfileRef), end to end.

Real: the consumer and provider API servers, the upstream ClusterProfile CRD and the upstream secretreader access
provider plugin (sigs.k8s.io/cluster-inventory-api, built by hack/build-secretreader.sh), the chart's RBAC (a
release with clusterProfiles enabled, whose operator runs as a process with its ServiceAccount and the provider
file the chart rendered), the provider's ServiceAccount tokens and their revocation. Liqo is the stand-in.

The plugin reads the token of the provider from Secret <release namespace>/<clusterName> with the operator's
ServiceAccount, as in a Pod (here through the kubeconfig the provider file gives it). The operator makes no
periodic pass in the test's time: a ClusterProfile's changes reach its peering through their watch. The test
shows: a
ClusterProfile whose control plane is not healthy is reported and not peered with; healthy, the peering becomes
Ready; the token rotated under the live peering (the old one revoked on the provider) is fetched again after the
provider's 401 and the peering goes on by itself; unpeering leaves nothing. Then each refusal's reason, and a
LiqoPeeringSet that selects ClusterProfiles.
"""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from testenv import chart_rbac
from testenv import kube as k
from testenv.kube import Kube
from testenv.leakscan import LeakScan
from testenv.liqo_env.pytest_plugin import StandInProcess
from testenv.operator_support import OperatorEnv, OperatorProcess, liqo_objects_left, tenant_ns, wait_for

pytestmark = pytest.mark.standin  # stops the session's operator for its own: on a stand-in pair of its own

REPO = Path(__file__).resolve().parents[2]
RELEASE = "lpo-cp"  # the chart with clusterProfiles, its operator run as a process; its namespace too
NS = "e2e-clusterprofile"
PROFILE = "edge-1"
NAME = "through-profile"
TOKEN_SECRET = "edge-1-token"  # in RELEASE's namespace: the clusterName of the profile's exec extension
EMPTY_SECRET = "edge-empty"  # granted as well, without a token: the plugin fails
PROVIDER_NS = "cp-access"  # on the provider: the ServiceAccounts whose tokens the plugin gives
OLD, NEW = "peer-a", "peer-b"
CLUSTER_PROFILE = k.Res("multicluster.x-k8s.io", "v1alpha1", "clusterprofiles")
SERVICE_ACCOUNT = k.Res("", "v1", "serviceaccounts")
EXEC_EXTENSION = "client.authentication.k8s.io/exec"
AGENT = "e2e-clusterprofile"
LIQOPEERINGSET = k.Res("peering.liqo-operator.io", "v1alpha1", "liqopeeringsets")
LIQOPEERING = k.Res("peering.liqo-operator.io", "v1alpha1", "liqopeerings")
SET = "edges"


@dataclass
class ProfileEnv:
    env: OperatorEnv
    consumer: Kube
    provider: Kube
    operator: OperatorProcess
    tokens: dict[str, str]  # provider ServiceAccount -> its token


def build() -> Path:
    """The plugin and the CRD, built (a no-op when cached); a machine without Go fails here, as it must."""
    proc = subprocess.run(
        [str(REPO / "hack" / "build-secretreader.sh")], capture_output=True, text=True, timeout=1800, check=False
    )
    assert proc.returncode == 0, f"hack/build-secretreader.sh failed:\n{proc.stderr[-4000:]}"
    return Path(proc.stdout.strip().splitlines()[-1])


def install_crd(consumer: Kube, built: Path) -> None:
    crd = yaml.safe_load((built / "clusterprofiles.yaml").read_text())
    crd.pop("status", None)
    consumer.apply(k.CRD, crd, AGENT)

    def established() -> bool:
        got = consumer.get(k.CRD, crd["metadata"]["name"]) or {}
        conditions = (got.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

    wait_for("the ClusterProfile CRD to be established", established, timeout=30)


def provider_tokens(provider: Kube) -> dict[str, str]:
    """Two ServiceAccounts of the provider allowed to peer, and a token of each."""
    provider.apply(k.NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PROVIDER_NS}}, AGENT)
    tokens = {}
    for account in (OLD, NEW):
        body = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account, "namespace": PROVIDER_NS}}
        provider.apply(SERVICE_ACCOUNT, body, AGENT, PROVIDER_NS)
        request: Any = {"spec": {"audiences": None, "expirationSeconds": 7200}}
        answer = k8s.CoreV1Api(provider.api).create_namespaced_service_account_token(account, PROVIDER_NS, request)
        tokens[account] = str(answer.status.token)  # type: ignore[union-attr]
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "e2e-clusterprofile-peer"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": a, "namespace": PROVIDER_NS} for a in (OLD, NEW)],
    }
    provider.apply(k.CLUSTERROLEBINDING, binding, AGENT)
    return tokens


def authenticated(provider: Kube, token: str) -> bool:
    review: Any = {"spec": {"token": token}}
    answer = k8s.AuthenticationV1Api(provider.api).create_token_review(review)
    return bool(answer.status and answer.status.authenticated)


def put_token(consumer: Kube, name: str, token: str | None) -> None:
    data = {"token": base64.b64encode(token.encode()).decode()} if token else {"other": ""}
    body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": RELEASE}, "data": data}
    consumer.apply(k.SECRET, body, AGENT, RELEASE)


def install_chart(env: OperatorEnv, built: Path, plugin_kubeconfig: Path) -> chart_rbac.ChartRelease:
    """The chart with clusterProfiles: its provider file names the built plugin, which reads its Secrets
    through ``plugin_kubeconfig`` (in a Pod, through its in-cluster configuration)."""
    provider = "clusterProfiles.providers[0]"
    sets = (
        *chart_rbac.SUITE_VALUES,
        "clusterProfiles.enabled=true",
        f"{provider}.name=secretreader",
        f"{provider}.execConfig.apiVersion=client.authentication.k8s.io/v1",
        f"{provider}.execConfig.command={built / 'secretreader-plugin'}",
        f"{provider}.execConfig.provideClusterInfo=true",
        f"{provider}.execConfig.env[0].name=KUBECONFIG",
        f"{provider}.execConfig.env[0].value={plugin_kubeconfig}",
        f"clusterProfiles.secretReader.secretNames={{{TOKEN_SECRET},{EMPTY_SECRET}}}",
    )
    return chart_rbac.install(env.lc["consumer"].kubeconfig, env.lc.namespace, sets, RELEASE, RELEASE)


def plugin_kubeconfig(chart: chart_rbac.ChartRelease, path: Path) -> None:
    """The operator's ServiceAccount, in the release's namespace: where the plugin reads its Secrets."""
    chart.service_account_kubeconfig(path)
    config = yaml.safe_load(path.read_text())
    config["contexts"][0]["context"]["namespace"] = RELEASE
    path.write_text(yaml.safe_dump(config))


def provider_file(consumer: Kube, path: Path) -> Path:
    """The provider file as the chart rendered it, from its ConfigMap."""
    config = consumer.get(k.CONFIGMAP, f"{RELEASE}-liqo-peering-operator-clusterprofile-providers", RELEASE)
    assert config is not None
    path.write_text(config["data"]["providers.json"])
    return path


@pytest.fixture(scope="module")
def profiles(
    operator_env: OperatorEnv, tmp_path_factory: pytest.TempPathFactory, leak_scan: LeakScan
) -> Iterator[ProfileEnv]:
    work = tmp_path_factory.mktemp("clusterprofile")
    built = build()
    consumer = Kube.from_kubeconfig(str(operator_env.lc["consumer"].kubeconfig), AGENT)
    provider = Kube.from_kubeconfig(str(operator_env.lc["provider"].kubeconfig), AGENT)
    chart: chart_rbac.ChartRelease | None = None
    operator: OperatorProcess | None = None
    stood_down = False
    try:
        install_crd(consumer, built)
        tokens = provider_tokens(provider)
        chart = install_chart(operator_env, built, work / "plugin.kubeconfig")
        plugin_kubeconfig(chart, work / "plugin.kubeconfig")
        put_token(consumer, TOKEN_SECRET, tokens[OLD])
        put_token(consumer, EMPTY_SECRET, None)
        consumer.apply(k.NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}, AGENT)
        # One operator at a time on the consumer: the session's stands down for this one.
        operator_env.operator.stop()
        stood_down = True
        flags = [
            *("--clusterprofile-provider-file", str(provider_file(consumer, work / "providers.json"))),
            # No periodic pass in the test's time: what wakes a peering is the ClusterProfile's watch.
            "--resync-interval=3600",
        ]
        operator = chart.operator(work, flags).start()
        leak_scan.add_log(operator.log_path)
        yield ProfileEnv(operator_env, consumer, provider, operator, tokens)
    finally:
        try:
            leak_scan.collect({"consumer": operator_env.peerings.api, "provider": operator_env.provider_api})
        finally:
            _clean_up(operator_env, consumer, provider)
            if operator is not None:
                operator.stop()
            if chart is not None:
                chart.uninstall()
            consumer.delete(k.NAMESPACE, RELEASE)
            if stood_down:
                operator_env.operator.start()


def _clean_up(env: OperatorEnv, consumer: Kube, provider: Kube) -> None:
    """What a failed test left: its peerings unpeered (finalizers released if they hang), its objects gone."""
    for item in consumer.list(LIQOPEERINGSET, NS):  # first: a set would make its peerings again
        consumer.patch(LIQOPEERINGSET, item["metadata"]["name"], {"spec": {"deletionPolicy": "Orphan"}}, NS)
        consumer.delete(LIQOPEERINGSET, item["metadata"]["name"], NS)
    for item in env.peerings.in_namespace(NS):
        env.peerings.delete(NS, item["metadata"]["name"])
    for item in env.peerings.in_namespace(NS):
        try:
            env.peerings.wait_gone(NS, item["metadata"]["name"], timeout=60)
        except AssertionError:
            env.peerings.patch(NS, item["metadata"]["name"], {"metadata": {"finalizers": None}})
    consumer.delete(k.NAMESPACE, NS)
    provider.delete(k.NAMESPACE, PROVIDER_NS)
    provider.delete(k.CLUSTERROLEBINDING, "e2e-clusterprofile-peer")


def cluster_of(provider: Kube, cluster_name: str) -> dict[str, Any]:
    """The provider as a ClusterProfile's access provider describes it: server, CA, and the clusterName the
    secretreader plugin reads the token of."""
    return {
        "server": provider.server,
        "certificate-authority-data": base64.b64encode(provider.ca_pem).decode(),
        "extensions": [{"name": EXEC_EXTENSION, "extension": {"clusterName": cluster_name}}],
    }


def put_profile(
    p: ProfileEnv, name: str, healthy: bool, offered: str = "secretreader", cluster_name: str = TOKEN_SECRET
) -> None:
    """The ClusterProfile as its cluster manager writes it: the object, then its status (the subresource)."""
    body = {
        "apiVersion": "multicluster.x-k8s.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"displayName": name, "clusterManager": {"name": "e2e"}},
    }
    p.consumer.apply(CLUSTER_PROFILE, body, AGENT, NS)
    set_health(p, name, healthy)
    status = {"accessProviders": [{"name": offered, "cluster": cluster_of(p.provider, cluster_name)}]}
    p.consumer.patch(CLUSTER_PROFILE, name, {"status": status}, NS, sub="status")


def set_health(p: ProfileEnv, name: str, healthy: bool) -> None:
    condition = {
        "type": "ControlPlaneHealthy",
        "status": "True" if healthy else "False",
        "reason": "Probed" if healthy else "APIServerUnreachable",
        "message": "the API server answers" if healthy else "no answer from the API server for 5m",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    p.consumer.patch(CLUSTER_PROFILE, name, {"status": {"conditions": [condition]}}, NS, sub="status")


def provider_tenant_namespaces(p: ProfileEnv) -> list[str]:
    selector = f"liqo.io/remote-cluster-id={p.env.consumer_id},liqo.io/tenant-namespace=true"
    return [ns["metadata"]["name"] for ns in p.provider.list(k.NAMESPACE, selector=selector)]


def test_a_peering_through_a_clusterprofile(profiles: ProfileEnv, liqo_standin: StandInProcess) -> None:
    p, peerings = profiles, profiles.env.peerings
    # An earlier module's peering may have left its tenant namespace (unpeering keeps them by default, as
    # liqoctl unpeer does): what counts is that this test's refusal adds none.
    before = provider_tenant_namespaces(p)

    # Not healthy: reported, and nothing is made on either cluster.
    put_profile(p, PROFILE, healthy=False)
    peerings.create(NS, NAME, {"remoteClusterProfileRef": {"name": PROFILE}, "timeout": "2m"})
    cond = peerings.wait_reason(NS, NAME, "ClusterProfileUnhealthy")
    assert "APIServerUnreachable: no answer from the API server for 5m" in cond["message"], cond
    status = peerings.status(NS, NAME)
    assert status["peerStatus"] == "error" and not status.get("remoteClusterID"), status
    assert provider_tenant_namespaces(p) == before

    # Healthy (its status change wakes the peering): Ready, through the plugin's token.
    set_health(p, PROFILE, healthy=True)
    status = peerings.wait_status(NS, NAME, "ready")
    assert status["remoteClusterID"] == p.env.provider_id
    c_ns, p_ns = tenant_ns(p.env.peerings.api, p.env.provider_id), tenant_ns(p.env.provider_api, p.env.consumer_id)

    # The token rotated under the live peering: the Secret holds the new one, the old one is revoked.
    put_token(p.consumer, TOKEN_SECRET, p.tokens[NEW])
    p.provider.delete(SERVICE_ACCOUNT, OLD, PROVIDER_NS)
    wait_for("the old token to be refused by the provider", lambda: not authenticated(p.provider, p.tokens[OLD]))
    assert authenticated(p.provider, p.tokens[NEW])
    # A change the operator must write on the provider: refused with the old token (401), the plugin runs again.
    peerings.patch(NS, NAME, {"spec": {"commonMetadata": {"labels": {"rotation": "done"}}}})
    generation = (peerings.get(NS, NAME) or {})["metadata"]["generation"]

    def rotated() -> bool:
        tenants = p.provider.list(k.TENANT, p_ns)
        labelled = bool(tenants) and all((t["metadata"].get("labels") or {}).get("rotation") == "done" for t in tenants)
        status = peerings.status(NS, NAME)
        return labelled and status.get("peerStatus") == "ready" and status.get("observedGeneration") == generation

    wait_for("the provider's Tenant relabelled and the peering Ready with the new token", rotated, timeout=120)

    # Not healthy while peered: reported, the peering's objects stay; healthy again: Ready by itself.
    set_health(p, PROFILE, healthy=False)
    peerings.wait_reason(NS, NAME, "ClusterProfileUnhealthy")
    assert p.provider.list(k.TENANT, p_ns), "the provider's objects stay while the profile is unhealthy"
    set_health(p, PROFILE, healthy=True)
    peerings.wait_status(NS, NAME, "ready")

    # Unpeering leaves nothing.
    peerings.delete(NS, NAME)
    peerings.wait_gone(NS, NAME)
    assert liqo_objects_left(p.env, c_ns, p_ns) == []
    log = p.operator.log()
    assert p.tokens[OLD] not in log and p.tokens[NEW] not in log


def test_each_refusal_has_its_reason(profiles: ProfileEnv) -> None:
    p, peerings = profiles, profiles.env.peerings
    peerings.create(NS, "no-profile", {"remoteClusterProfileRef": {"name": "absent"}})
    cond = peerings.wait_reason(NS, "no-profile", "ClusterProfileNotFound")
    assert f"ClusterProfile {NS}/absent not found" in cond["message"], cond

    # Created (which wakes the peering), offering only an access provider the operator does not have.
    put_profile(p, "absent", healthy=True, offered="kubeconfig")
    cond = peerings.wait_reason(NS, "no-profile", "NoAccessProvider")
    assert "it offers: kubeconfig; the operator's: secretreader" in cond["message"], cond

    # Offering the operator's provider, for a cluster whose Secret holds no token: the plugin fails.
    put_profile(p, "absent", healthy=True, cluster_name=EMPTY_SECRET)
    cond = peerings.wait_reason(NS, "no-profile", "AccessProviderFailed")
    assert "secretreader" in cond["message"] and "exit status 1" in cond["message"], cond
    assert f'{RELEASE}/{EMPTY_SECRET} missing "token" key' in cond["message"], cond

    # Deleted: its watch says so at once.
    p.consumer.delete(CLUSTER_PROFILE, "absent", NS)
    peerings.wait_reason(NS, "no-profile", "ClusterProfileNotFound")

    peerings.delete(NS, "no-profile")
    peerings.wait_gone(NS, "no-profile")
    events = [json.loads(line) for line in p.operator.log().splitlines() if line.startswith("{")]
    assert events, "the operator logged"


def set_status(p: ProfileEnv) -> dict[str, Any]:
    return dict((p.consumer.get(LIQOPEERINGSET, SET, NS) or {}).get("status") or {})


def set_counts(p: ProfileEnv, ready: int, unavailable: int) -> dict[str, Any] | None:
    status = set_status(p)
    return status if (status.get("ready"), status.get("unavailable")) == (ready, unavailable) else None


def line_of(p: ProfileEnv, profile: str) -> dict[str, Any]:
    return next((line for line in set_status(p).get("peerings") or [] if line.get("cluster") == profile), {})


def test_a_peeringset_peers_with_the_clusterprofiles_it_selects(
    profiles: ProfileEnv, liqo_standin: StandInProcess
) -> None:
    """A LiqoPeeringSet over ClusterProfiles (spec.source ClusterProfile): one LiqoPeering per selected profile,
    through its access provider. A selected profile whose control plane is not healthy gets no LiqoPeering: it is
    a line of its own, counted as unavailable; a peered one turning unhealthy stays, its line saying why.
    Deleting the set unpeers."""
    p = profiles
    put_profile(p, PROFILE, healthy=True)
    put_token(p.consumer, TOKEN_SECRET, p.tokens[NEW])  # the token the first test rotated to
    p.consumer.patch(CLUSTER_PROFILE, PROFILE, {"metadata": {"labels": {"fleet": "edge"}}}, NS)
    put_profile(p, "unselected", healthy=True)  # no label
    body = {
        "apiVersion": LIQOPEERINGSET.api_version,
        "kind": "LiqoPeeringSet",
        "metadata": {"name": SET},
        "spec": {"source": "ClusterProfile", "selector": {"matchLabels": {"fleet": "edge"}}, "template": {}},
    }
    p.consumer.create(LIQOPEERINGSET, body, NS)
    status = wait_for("the set's one peering Ready", lambda: set_counts(p, 1, 0), timeout=180)
    (line,) = status["peerings"]
    assert line["cluster"] == PROFILE and line["remoteClusterID"] == p.env.provider_id, line
    (child,) = p.consumer.list(LIQOPEERING, NS)
    assert child["spec"]["remoteClusterProfileRef"] == {"name": PROFILE}, child["spec"]

    # Selected while unhealthy: not peered with, counted as unavailable.
    put_profile(p, "edge-2", healthy=False)
    p.consumer.patch(CLUSTER_PROFILE, "edge-2", {"metadata": {"labels": {"fleet": "edge"}}}, NS)
    status = wait_for("edge-2 counted as unavailable", lambda: set_counts(p, 1, 1), timeout=120)
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "ProvidersUnavailable"), ready
    assert "ClusterProfile edge-2: ControlPlaneHealthy" in ready["message"], ready
    assert len(p.consumer.list(LIQOPEERING, NS)) == 1
    p.consumer.delete(CLUSTER_PROFILE, "edge-2", NS)
    wait_for("edge-2 gone from the set", lambda: set_counts(p, 1, 0), timeout=120)

    # The peered profile turning unhealthy: its LiqoPeering stays and says so.
    set_health(p, PROFILE, healthy=False)
    wait_for("the line to say why", lambda: line_of(p, PROFILE).get("reason") == "ClusterProfileUnhealthy", timeout=120)
    set_health(p, PROFILE, healthy=True)
    wait_for("the set Ready again", lambda: set_counts(p, 1, 0), timeout=180)

    p.consumer.delete(LIQOPEERINGSET, SET, NS)
    wait_for("the set's peering gone", lambda: not p.consumer.list(LIQOPEERING, NS), timeout=180)
    wait_for("the set gone", lambda: p.consumer.get(LIQOPEERINGSET, SET, NS) is None, timeout=60)
    p.consumer.delete(CLUSTER_PROFILE, "unselected", NS)
