"""The operator as users run it in a cluster: a Pod of the Helm chart's Deployment on a real node.

Two local clusters with one real node each (testenv.localk8s, `node_clusters`), Liqo's objects on both and
the Liqo stand-in as a process against both (as in the other suites). The image is the one `make images`
built from the Dockerfile, loaded into the nodes' containerd. `helm install` runs the chart: the operator
reads in-cluster config (the `kubernetes` Service, through kube-proxy), acts with the chart's
ServiceAccount and RBAC, the kubelet runs its probes and enforces its securityContext, and its metrics are
scraped through the chart's Service from another Pod, and by a real Prometheus configured from the chart's
ServiceMonitor and PrometheusRule (testenv.prometheus), which fires the not-Ready alert while the operator's
Pod is cut off from the provider and whose data every panel of the chart's dashboard shows (the peering is
deleted while cut off, then made again with a minted provider user, beside a LiqoPeeringSet). The provider's
kubeconfig in the Secret points at the provider's API server on the LAN, where the Pod reaches it.

The tests run in order, on one release: install, Ready, metrics, alerts and dashboard, upgrade, a killed
Pod, two replicas (the active one's Pod deleted, its container SIGKILLed, its process frozen), uninstall
(once keeping the CRD, once not).
"""

from __future__ import annotations

import json
import signal
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from hack.crdgen import CRD_NAME
from testenv import audit
from testenv import dashboard as board
from testenv import kube as k
from testenv.helm import CHART, run_helm
from testenv.kube import Kube
from testenv.leakscan import LeakScan
from testenv.liqo_env.pytest_plugin import LiqoClusters, StandInProcess
from testenv.localk8s.images import Image
from testenv.localk8s.pods import python_pod, run_to_completion
from testenv.operator_release import (
    FULLNAME,
    RELEASE,
    RELEASE_NS,
    SELECTOR,
    Handover,
    Release,
    ha_values,
    standing_by,
)
from testenv.operator_support import SECRET, Peerings, api_client, partitioned, tenant_ns, wait_for
from testenv.prometheus import Prometheus, grant_discovery, namespaces, revoke_discovery, rule_file, scrape_configs
from testenv.sampler import ReadySampler

PEERING_NS = "e2e-operator-pod"
NAME = "provider"
LIFETIME = 15  # ha.peeringLifetime of the two-replica release: seconds a replica's peering entry stays valid

# What the operator makes for one peering, per cluster: (resource, plural group, in the tenant namespace).
CONSUMER_OBJECTS = [
    ("networking.liqo.io", "configurations"),
    ("networking.liqo.io", "gatewayclients"),
    ("networking.liqo.io", "publickeies"),
    ("authentication.liqo.io", "identities"),
    ("authentication.liqo.io", "resourceslices"),
    ("offloading.liqo.io", "virtualnodes"),
]
# The chart's monitoring objects as Prometheus runs them here: a scrape a second, and the not-Ready alert
# after seconds rather than the default 10 minutes.
SCRAPE_SECONDS = 1
MONITORING = (
    "metrics.serviceMonitor.enabled=true",
    f"metrics.serviceMonitor.interval={SCRAPE_SECONDS}s",
    "prometheusRule.enabled=true",
    "prometheusRule.peeringNotReadyFor=5s",
)
PROMETHEUS_USER = "prometheus"  # who Prometheus reads the consumer's API server as
DASHBOARD = CHART / "dashboards" / "liqo-peering-operator.json"
DASHBOARD_PNG = Path(__file__).resolve().parents[2] / "docs" / "operations" / "dashboard.png"
# The dashboard's panels whose series this suite does not make, and why: none, every panel shows data.
PANELS_WITHOUT_DATA: dict[int, str] = {}
LIQOPEERINGSET = k.Res("peering.liqo-operator.io", "v1alpha1", "liqopeeringsets")

PROVIDER_OBJECTS = [
    ("networking.liqo.io", "configurations"),
    ("networking.liqo.io", "gatewayservers"),
    ("networking.liqo.io", "publickeies"),
    ("authentication.liqo.io", "tenants"),
]


@dataclass
class Suite(Release):
    lc: LiqoClusters
    standin: StandInProcess
    peerings: Peerings
    python: Image  # the base image, for the Pods that look at the cluster from inside
    # When the suite began: the consumer's audit log holds writes of other operator Pods before it (the
    # session's node clusters are shared with test_flux_helmrelease.py).
    started: datetime

    def status(self) -> dict[str, Any]:
        return self.peerings.status(PEERING_NS, NAME)

    def install_args(self, *sets: str, wait: bool = True) -> list[str]:
        # Minting allowed: the peering is made again with a minted provider user (spec.credentials.mint).
        return super().install_args("credentialsMinting=true", *sets, wait=wait)

    def change_and_reconcile(self, timeout: str) -> set[str | None]:
        """The peering's spec changed and reconciled, Ready; the Pods that wrote (Release.reconciled_by)."""
        return self.reconciled_by(self.peerings, PEERING_NS, NAME, timeout)


@pytest.fixture(scope="module")
def suite(
    liqo_node_clusters: LiqoClusters, node_images: dict[str, Image], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Suite]:
    lc = liqo_node_clusters
    standin = StandInProcess(lc, tmp_path_factory.mktemp("standin") / "liqo-standin.log")
    peerings = Peerings(api_client(lc["consumer"].kubeconfig))
    peerings.make_namespace(PEERING_NS)
    # The provider's admin kubeconfig: its server is the provider's API server on the LAN.
    peerings.put_kubeconfig_secret(PEERING_NS, SECRET, Path(lc["provider"].kubeconfig).read_bytes())
    try:
        yield Suite(
            cluster=lc["consumer"],
            image=node_images["operator"],
            liqo_namespace=lc.namespace,
            lc=lc,
            standin=standin,
            peerings=peerings,
            python=node_images["python-base"],
            started=datetime.now(UTC),
        )
    finally:
        standin.stop()


@pytest.fixture(autouse=True)
def scanned(suite: Suite, leak_scan: LeakScan) -> Iterator[None]:
    """After each test, while its Pods still exist: their whole logs, and the clusters' Secrets, Events and
    statuses, for the run's leak scan (tests/e2e/test_zz_no_leaks.py)."""
    yield
    suite.scan_logs(leak_scan)
    leak_scan.collect({side: api_client(suite.lc[side].kubeconfig) for side in ("consumer", "provider")})


def test_helm_install_runs_the_operator_as_a_pod(suite: Suite) -> None:
    out = suite.helm("install", RELEASE, *suite.install_args(), "--create-namespace")
    assert "STATUS: deployed" in out, out
    (pod,) = suite.wait_ready(1, "the operator Pod to be ready (its readiness probe)", timeout=60)
    spec = pod["spec"]
    assert spec["serviceAccountName"] == FULLNAME and spec["nodeName"] == "consumer-node-0"
    (container,) = spec["containers"]
    assert container["image"] == suite.image.ref
    # Ready through /readyz (kopf started, informers synced); started and live through /livez.
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["startupProbe"]["httpGet"]["path"] == container["livenessProbe"]["httpGet"]["path"] == "/livez"
    (status,) = pod["status"]["containerStatuses"]
    assert status["ready"] and status["restartCount"] == 0

    # The kubelet enforced the chart's securityContext: the operator's process, as the kernel sees it.
    process = _container_process(suite, status["containerID"])
    fields = dict(line.split(":\t", 1) for line in process["status"].splitlines() if ":\t" in line)
    assert fields["Uid"].split()[:2] == ["65532", "65532"] and fields["Gid"].split()[:2] == ["65532", "65532"]
    assert int(fields["CapEff"], 16) == 0 and int(fields["CapBnd"], 16) == 0, fields
    assert fields["NoNewPrivs"] == "1" and fields["Seccomp"] == "2", fields  # 2: a filter (RuntimeDefault)
    root = next(line for line in process["mountinfo"].splitlines() if line.split()[4] == "/")
    assert "ro" in root.split()[5].split(","), root


def _container_process(suite: Suite, container_id: str) -> dict[str, str]:
    """/proc of the container's main process on the node, found through the node's containerd."""
    pid = suite.container_pid(container_id)
    return {name: Path(f"/proc/{pid}/{name}").read_text() for name in ("status", "mountinfo")}


@dataclass
class Monitoring:
    prometheus: Prometheus
    started: float  # Unix time: when Prometheus began to scrape the operator


@pytest.fixture(scope="module")
def monitoring(suite: Suite, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Monitoring]:
    """Prometheus in the consumer node's network namespace, discovering what the chart's ServiceMonitor selects
    (rendered by helm for this release) through the consumer's API server, as a user with the read access the
    Prometheus Operator gives Prometheus, and evaluating the chart's PrometheusRule; started before the
    peering, so that its time to Ready and stage durations are in the data."""
    rendered = run_helm("template", RELEASE, *suite.install_args(*MONITORING, wait=False))
    objects = {d["kind"]: d for d in yaml.safe_load_all(rendered) if d}
    node = suite.cluster.node_specs()[0]
    admin = Kube(suite.cluster.api_client())
    watched = namespaces(objects["ServiceMonitor"])
    prometheus = Prometheus(node.netns, node.ip, tmp_path_factory.mktemp("prometheus"))
    try:
        grant_discovery(admin, PROMETHEUS_USER, watched)
        prometheus.start(
            scrape_configs(objects["ServiceMonitor"], suite.cluster.user_kubeconfig(PROMETHEUS_USER)),
            [rule_file(objects["PrometheusRule"])],
            f"{SCRAPE_SECONDS}s",
        )

        def scraped() -> list[dict[str, Any]] | None:
            return [t for t in prometheus.active_targets() if t["health"] == "up"] or None

        try:
            (target,) = wait_for("Prometheus to scrape what the ServiceMonitor selects", scraped, timeout=60)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{prometheus.active_targets()}\n{prometheus.log()}") from None
        # The one target is the operator's Pod behind the metrics Service, in the job the alerts select.
        (pod,) = suite.pods()
        labels = target["labels"]
        assert labels["pod"] == pod["metadata"]["name"] and labels["namespace"] == RELEASE_NS, labels
        assert labels["job"] == labels["service"] == f"{FULLNAME}-metrics" and labels["endpoint"] == "metrics", labels
        yield Monitoring(prometheus, time.time())
    finally:
        prometheus.stop()
        revoke_discovery(admin, PROMETHEUS_USER, watched)


def test_a_peering_turns_ready(suite: Suite, monitoring: Monitoring) -> None:
    suite.peerings.create(PEERING_NS, NAME, {"remoteKubeconfigSecretRef": {"name": SECRET}, "timeout": "3m"})
    try:
        status = suite.peerings.wait_status(PEERING_NS, NAME, "ready", timeout=180)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{suite.operator_logs()}") from None
    assert status["localClusterID"] == suite.lc.ids["consumer"]
    assert status["remoteClusterID"] == suite.lc.ids["provider"]
    # Every write came from the operator's Pod, as the chart's ServiceAccount (a token bound to the Pod).
    writes = audit.writes(suite.lc["consumer"].audit_log, suite.started, user_agent_prefix="liqo-peering-operator")
    assert writes and {w.username for w in writes} == {f"system:serviceaccount:{RELEASE_NS}:{FULLNAME}"}
    assert {w.pod_name for w in writes} == {suite.pods()[0]["metadata"]["name"]}


def test_metrics_scraped_through_the_service(suite: Suite) -> None:
    url = f"http://{FULLNAME}-metrics.{RELEASE_NS}.svc.cluster.local:8080/metrics"
    script = f"""
import time, urllib.request
for _ in range(30):
    try:
        print(urllib.request.urlopen("{url}", timeout=5).read().decode())
        break
    except OSError as e:
        print("retry:", e)
        time.sleep(1)
"""
    pod = python_pod(f"scrape-{uuid.uuid4().hex[:6]}", suite.python.ref, script)
    metrics = run_to_completion(suite.kc, PEERING_NS, pod)
    assert 'liqo_peering_peerings{status="ready"} 1.0' in metrics, metrics[-3000:]
    assert "liqo_peering_time_to_ready_seconds_count 1.0" in metrics, metrics[-3000:]


def _not_ready_alert(prometheus: Prometheus, peering: dict[str, str], state: str) -> dict[str, Any] | None:
    return next(
        (
            a
            for a in prometheus.alerts()
            if a["labels"].get("alertname") == "LiqoPeeringNotReady"
            and a["state"] == state
            and all(a["labels"].get(key) == value for key, value in peering.items())
        ),
        None,
    )


def test_prometheus_fires_the_not_ready_alert_while_the_provider_is_cut_off_and_the_dashboard_shows_it(
    suite: Suite, monitoring: Monitoring, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    began = time.monotonic()
    prometheus = monitoring.prometheus
    peering = {"namespace": PEERING_NS, "name": NAME, "remote_cluster_id": suite.lc.ids["provider"]}
    assert _not_ready_alert(prometheus, peering, "firing") is None
    # A LiqoPeeringSet, for the sets' panel: its selector picks no Secret, so it makes no LiqoPeering.
    fleet = {"name": "fleet", "namespace": PEERING_NS}
    suite.kc.create(
        LIQOPEERINGSET,
        {
            "apiVersion": "peering.liqo-operator.io/v1alpha1",
            "kind": "LiqoPeeringSet",
            "metadata": {"name": fleet["name"]},
            "spec": {"selector": {"matchLabels": {"liqo-fleet": "none"}}, "template": {}},
        },
        PEERING_NS,
    )
    node = suite.cluster.node_specs()[0]
    # The operator's Pod cut off from the provider's API server, nothing else: the stand-in, the provider's
    # node and the consumer's API server go on.
    with partitioned(node.netns, suite.lc["provider"].server):
        cut = time.time()
        suite.peerings.wait_reason(PEERING_NS, NAME, "ProviderUnreachable", timeout=120)
        alert = wait_for(
            "LiqoPeeringNotReady firing for the peering",
            partial(_not_ready_alert, prometheus, peering, "firing"),
            timeout=120,
        )
        fired = time.time() - cut
    healed = time.time()
    assert alert["labels"]["severity"] == "warning", alert
    assert f"{PEERING_NS}/{NAME}" in alert["annotations"]["description"], alert
    suite.peerings.wait_status(PEERING_NS, NAME, "ready", timeout=180)
    wait_for(
        "LiqoPeeringNotReady to resolve once the peering is Ready again",
        lambda: _not_ready_alert(prometheus, peering, "firing") is None,
        timeout=120,
    )
    ready_again = time.time()

    # Deleted while its provider is cut off, the peering's unpeering waits for it (the Unpeering panels),
    # and goes on once it is back.
    with partitioned(node.netns, suite.lc["provider"].server):
        suite.peerings.delete(PEERING_NS, NAME)
        wait_for(
            "Prometheus to scrape the peering's unpeering",
            partial(_series, prometheus, "liqo_peering_deletion_timestamp_seconds", peering),
            timeout=60,
        )
        unpeering = time.time()
    suite.peerings.wait_gone(PEERING_NS, NAME, timeout=120)
    unpeered = time.time()
    # Made again with a minted provider user (the credential panels); the rest of the module runs on it.
    suite.peerings.create(
        PEERING_NS,
        NAME,
        {"remoteKubeconfigSecretRef": {"name": SECRET}, "timeout": "3m", "credentials": {"mint": True}},
    )
    status = suite.peerings.wait_status(PEERING_NS, NAME, "ready", timeout=180)
    assert status["credentials"]["notAfter"], status
    for metric in ("liqo_peering_credential_expiration_timestamp_seconds", "liqo_peering_set_desired"):
        labels = fleet if metric.startswith("liqo_peering_set") else peering
        wait_for(f"Prometheus to scrape {metric}", partial(_series, prometheus, metric, labels), timeout=60)

    # Every panel of the dashboard, over the whole run (Ready, cut off, Ready again), with "All" chosen for its
    # variables, as Grafana would send it; and the variables' own selectors.
    dashboard = json.loads(DASHBOARD.read_text())
    start, end = monitoring.started, time.time()
    step = max(1.0, (end - start) / 300)
    ranges = {"range": end - start, "interval": step, "rate_interval": board.rate_interval(step, SCRAPE_SECONDS)}
    variables = {v["name"]: v["allValue"] for v in dashboard["templating"]["list"] if v["type"] == "query"}
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            selector = variable["definition"].removeprefix("label_values(").rsplit(",", 1)[0]
            assert prometheus.query(board.promql(selector, ranges, variables)), variable["definition"]
    data: dict[int, list[board.Series]] = {}
    for panel in board.panels(dashboard):
        data[panel["id"]] = [
            line
            for target in panel["targets"]
            for line in board.series(
                prometheus.query_range(board.promql(target["expr"], ranges, variables), start, end, step),
                target.get("legendFormat"),
            )
        ]
    titles = {panel["id"]: panel["title"] for panel in board.panels(dashboard)}
    empty = {i: titles[i] for i, lines in data.items() if not lines}
    assert set(empty) == set(PANELS_WITHOUT_DATA), f"panels without data: {empty}"
    # The table of peerings not Ready had this one, with why, while it was cut off.
    (not_ready,) = [i for i, title in titles.items() if title == "Peerings not ready"]
    rows = [s.name for s in data[not_ready]]
    assert any(f"name={NAME}" in r and "reason=ProviderUnreachable" in r for r in rows), rows
    prometheus.stop()  # nothing after this test reads it
    suite.kc.delete(LIQOPEERINGSET, fleet["name"], PEERING_NS)
    # The picture in the docs comes from a run of the whole module (a -k run leaves it alone).
    if not request.config.option.keyword:
        board.draw(
            dashboard,
            data,
            PANELS_WITHOUT_DATA,
            DASHBOARD_PNG,
            "The chart's dashboard from an end-to-end run: a LiqoPeering Ready, its provider cut off from the"
            " operator's Pod (shaded), Ready again;\ndeleted while cut off once more, then made again with a minted"
            " provider user; beside it, a LiqoPeeringSet that selects no Secret",
            span=(start, end),
            shaded=(cut, healed),
        )
    with capsys.disabled():
        print(
            f"\nBENCH Prometheus: provider cut off -> LiqoPeeringNotReady firing: {fired:.1f}s (for: 5s, scrape 1s);"
            f" healed -> resolved: {ready_again - healed:.1f}s; unpeering once the provider was back:"
            f" {unpeered - unpeering:.1f}s; the test took {time.monotonic() - began:.1f}s"
        )


def _series(prometheus: Prometheus, metric: str, labels: dict[str, str]) -> list[dict[str, Any]] | None:
    """The metric's series with these labels, as Prometheus has them now (None when it has none)."""
    selector = ", ".join(f'{key}="{value}"' for key, value in labels.items())
    return prometheus.query(f"{metric}{{{selector}}}") or None


def test_helm_upgrade_rolls_the_pod_and_the_peering_stays_ready(suite: Suite) -> None:
    (before,) = suite.pods()
    with ReadySampler(suite.status, "the peering, during the upgrade"):
        suite.helm("upgrade", RELEASE, *suite.install_args("logLevel=debug"))
        after = suite.successor(before)
        # The new Pod has taken over: it is the one that reconciles the peering now.
        suite.change_and_reconcile("4m")
    assert "--log-level=debug" in after["spec"]["containers"][0]["args"]


def test_a_killed_pod_is_replaced_and_nothing_is_duplicated(suite: Suite) -> None:
    (victim,) = suite.pods()
    since = datetime.now(UTC)
    k8s.CoreV1Api(suite.peerings.api).delete_namespaced_pod(
        victim["metadata"]["name"], RELEASE_NS, grace_period_seconds=0
    )
    replacement = suite.successor(victim)
    suite.change_and_reconcile("5m")
    _assert_one_of_each(suite)
    # The replacement resumed: it created nothing, it only brought what existed up to date. The victim, its Pod
    # object deleted at once (grace 0), runs until the kubelet kills its container: on a loaded machine its last
    # writes may land after the delete; no other Pod writes.
    writes = audit.writes(suite.lc["consumer"].audit_log, since, user_agent_prefix="liqo-peering-operator")
    assert {w.pod_name for w in writes} <= {replacement["metadata"]["name"], victim["metadata"]["name"]}
    assert replacement["metadata"]["name"] in {w.pod_name for w in writes}, "the replacement wrote nothing"
    assert not [w for w in writes if w.verb == "create" and w.resource != "events"], writes


def _assert_one_of_each(suite: Suite) -> None:
    """Exactly one of each Liqo object the peering needs, on both clusters: nothing duplicated or missing."""
    consumer_ns = tenant_ns(suite.peerings.api, suite.lc.ids["provider"])
    provider_api = api_client(suite.lc["provider"].kubeconfig)
    provider_ns = tenant_ns(provider_api, suite.lc.ids["consumer"])
    for api, namespace, kinds in (
        (suite.peerings.api, consumer_ns, CONSUMER_OBJECTS),
        (provider_api, provider_ns, PROVIDER_OBJECTS),
    ):
        custom = k8s.CustomObjectsApi(api)
        for group, plural in kinds:
            found: Any = custom.list_namespaced_custom_object(group, "v1beta1", namespace, plural)
            names = [i["metadata"]["name"] for i in found["items"]]
            assert len(names) == 1, f"{plural} in {namespace}: {names}"


def test_with_two_replicas_exactly_one_acts(suite: Suite, capsys: pytest.CaptureFixture[str]) -> None:
    # A short peering lifetime (the chart's default is 30 s) keeps the SIGKILL handover test below short.
    suite.helm("upgrade", RELEASE, *suite.install_args(*ha_values(LIFETIME)))
    pods = suite.wait_ready(2, "two ready replicas", timeout=180)
    names = [p["metadata"]["name"] for p in pods]
    # kopf peering: the replica of the lower priority (the later start) stands by. One that starts behind a
    # live higher one never resumes and logs nothing: the peering object and the logs together tell.
    suite.wait_one_acting(2)
    peers = wait_for("both replicas in the kopf peering object", partial(suite.live_peers, names))
    standby = min(names, key=lambda n: peers[n])
    writers = suite.change_and_reconcile("6m")
    assert len(writers) == 1 and standby not in writers, json.dumps(sorted(map(str, writers)))

    # Handover: the active replica's Pod is deleted, as a drain or a rollout
    # does (SIGTERM: kopf withdraws it from the peering object on its way out). The standby resumes, and
    # once the Deployment's replacement has joined, the next change is reconciled by one Pod alone, never
    # the deleted one.
    (active,) = writers
    assert active is not None
    deleted = time.monotonic()
    k8s.CoreV1Api(suite.peerings.api).delete_namespaced_pod(active, RELEASE_NS)
    wait_for(
        f"the standby {standby} to resume",
        lambda: not standing_by(suite.pod_log(standby)),
        timeout=120,
        interval=0.2,
    )
    handover = time.monotonic() - deleted
    pods = suite.wait_ready(2, "two ready replicas again", timeout=180)
    names = [p["metadata"]["name"] for p in pods]
    assert active not in names and standby in names, names
    # Which of the two acts is kopf peering's verdict: the live peer of the highest priority in the peering
    # object. (A replica that starts behind a higher one pauses without logging it, so logs cannot tell.)
    peers = wait_for("both replicas in the kopf peering object", partial(suite.live_peers, names), timeout=120)
    leader = max(names, key=lambda n: peers[n])
    # The replacement started later, so it ranks below the former standby (on one node's clock).
    if leader != standby:  # were it to outrank it, the former standby would pause again (and say so)
        wait_for(
            f"{standby} to stand by again",
            lambda: standing_by(suite.pod_log(standby)),
            timeout=60,
        )
    writers = suite.change_and_reconcile("7m")
    assert writers == {leader}, json.dumps({"writers": sorted(map(str, writers)), "priorities": peers})
    with capsys.disabled():
        print(f"\nBENCH HA handover: active Pod deleted -> standby resumed: {handover:.1f}s")


def test_a_sigkilled_active_replica_is_taken_over_and_restarted(
    suite: Suite, capsys: pytest.CaptureFixture[str]
) -> None:
    """The active replica dies without a word (SIGKILL: kopf cannot withdraw it from
    the peering object). A replica acts again once its entry expires (the peering lifetime) or once the
    kubelet's restart of its container announces itself under the same identity (the Pod's name) with a new
    priority, whichever comes first; the container restarts in the same Pod; one replica alone acts."""
    h = Handover(suite, LIFETIME)
    h.signal(signal.SIGKILL)
    h.wait_taken_over()
    leader = h.wait_restarted()
    # One replica alone reconciles a change of the spec, and nothing was made twice on either cluster.
    writers = suite.change_and_reconcile("8m")
    assert writers == {leader}, json.dumps({"writers": sorted(map(str, writers)), "leader": leader})
    _assert_one_of_each(suite)
    with capsys.disabled():
        print(
            f"\nBENCH HA handover after SIGKILL: {h.handover:.1f}s (peering lifetime {LIFETIME} s; taken over by the"
            f" {h.taker}; the restarted container announced itself after {h.seen['announced']:.1f}s)"
        )


def test_a_frozen_active_replica_is_taken_over_when_its_peering_entry_expires(
    suite: Suite, capsys: pytest.CaptureFixture[str]
) -> None:
    """The active replica stops without a word and does not come back (a lost node; here SIGSTOP: no keep-alive,
    no withdrawal, no restart): the standby takes over when the replica's peering entry expires, within the
    peering lifetime, and only the standby writes, once it has resumed. Then SIGKILL, so that it never resumes
    (it would act beside the standby); its restart is the SIGKILL test's subject, not waited for here (a second
    restart of a container within minutes waits out the kubelet's 10 s back-off)."""
    h = Handover(suite, LIFETIME)
    h.signal(signal.SIGSTOP)
    try:
        h.wait_taken_over()
        assert h.taker == "standby" and "announced" not in h.seen, h.seen  # the entry's expiry alone ended it
        h.assert_writes_while_acting(restarted=False)
    finally:
        h.signal(signal.SIGKILL)
    with capsys.disabled():
        print(
            f"\nBENCH HA handover after the active replica froze (SIGSTOP, as on a lost node): {h.handover:.1f}s"
            f" (peering lifetime {LIFETIME} s; its entry was {h.entry_age:.1f}s old when it froze, so it expired"
            f" {LIFETIME - h.entry_age:.1f}s after)"
        )


def test_helm_uninstall_honours_crds_keep(suite: Suite) -> None:
    ext = k8s.ApiextensionsV1Api(suite.peerings.api)
    # crds.keep=true (the default): the CRD, and the LiqoPeering with it, outlive the release.
    suite.helm("uninstall", RELEASE, "--namespace", RELEASE_NS, "--wait")
    wait_for("the operator Pods to be gone", lambda: not suite.kc.list(k.POD, RELEASE_NS, SELECTOR), timeout=120)
    assert ext.read_custom_resource_definition(CRD_NAME).metadata.name == CRD_NAME  # type: ignore[union-attr]
    assert suite.peerings.get(PEERING_NS, NAME) is not None

    # Installed again (the release adopts the CRD it kept), now with crds.keep=false. The peering is
    # unpeered first, so that no finalizer outlives the operator; then uninstalling removes the CRD.
    suite.helm("install", RELEASE, *suite.install_args("crds.keep=false"))
    suite.wait_ready(1, "the operator Pod to be ready", timeout=180)
    suite.peerings.delete(PEERING_NS, NAME)
    suite.peerings.wait_gone(PEERING_NS, NAME, timeout=120)
    suite.helm("uninstall", RELEASE, "--namespace", RELEASE_NS, "--wait")

    def crd_gone() -> bool:
        return CRD_NAME not in {c.metadata.name for c in ext.list_custom_resource_definition().items}  # type: ignore[union-attr]

    wait_for("the CRD to be deleted with the release", crd_gone, timeout=60)
