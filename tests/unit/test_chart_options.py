"""The chart's general values (as cert-manager's chart has them), the chart as a subchart of another, and the
NetworkPolicy: each rendered by `helm template`."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from testenv.helm import CHART, PLACEHOLDER_IMAGE, PLACEHOLDER_REPOSITORY
from unit.chart import FULLNAME, find, helm, pod_spec, render, render_error

HA = ("ha.enabled=true", "replicaCount=2")
API_SERVER = "networkPolicy.apiServer.cidrs={10.0.0.10/32}"
# Every optional part of the chart at once: each template renders something.
# ClusterProfiles, with a plugin image and a Secret for the secretreader plugin.
CLUSTER_PROFILES = (
    "clusterProfiles.enabled=true",
    "clusterProfiles.providers[0].name=secretreader",
    "clusterProfiles.providers[0].execConfig.apiVersion=client.authentication.k8s.io/v1",
    "clusterProfiles.providers[0].execConfig.command=/var/lib/liqo-peering-operator/plugins/secretreader-plugin",
    "clusterProfiles.providers[0].execConfig.provideClusterInfo=true",
    "clusterProfiles.plugins.image=example.io/plugins:1",
    "clusterProfiles.secretReader.secretNames={edge-1}",
)
EVERYTHING = (
    *HA,
    "watchNamespaces={team-a,team-b}",
    "metrics.serviceMonitor.enabled=true",
    "prometheusRule.enabled=true",
    "networkPolicy.enabled=true",
    API_SERVER,
    "grafanaDashboard.enabled=true",
    "restartLiqoOnRenewal=true",
    *CLUSTER_PROFILES,
)


def sources(*sets: str) -> set[str]:
    """The templates that rendered an object, from helm's `# Source:` comments."""
    out = helm("template", "lpo", str(CHART), *[a for s in (*PLACEHOLDER_IMAGE, *sets) for a in ("--set", s)])
    return {m.group(1) for m in re.finditer(r"^# Source: liqo-peering-operator/(\S+)", out, re.MULTILINE)}


def test_common_labels_are_on_every_object_the_chart_renders() -> None:
    templates = {str(p.relative_to(CHART)) for p in (CHART / "templates").rglob("*.yaml")}
    assert sources(*EVERYTHING) == templates, "a template renders nothing with every option on"
    docs = render(*EVERYTHING, "commonLabels.team=platform", "commonLabels.cost-center=42a")
    unlabelled = [
        f"{d['kind']}/{d['metadata']['name']}"
        for d in docs
        if {"team": "platform", "cost-center": "42a"}.items() - d["metadata"].get("labels", {}).items()
    ]
    assert unlabelled == []
    (deployment,) = find(docs, "Deployment")
    assert deployment["spec"]["template"]["metadata"]["labels"]["team"] == "platform"
    # The selector stays the chart's own: a label added later must not orphan the running pods.
    assert "team" not in deployment["spec"]["selector"]["matchLabels"]


def test_lint_is_clean_with_every_option() -> None:
    out = helm("lint", "--strict", str(CHART), *[a for s in (*PLACEHOLDER_IMAGE, *EVERYTHING) for a in ("--set", s)])
    assert "0 chart(s) failed" in out and "[WARNING]" not in out and "[ERROR]" not in out, out


def test_image_digest_replaces_the_tag() -> None:
    digest = "sha256:" + "ab" * 32
    for sets in ([f"image.digest={digest}"], [f"image.digest={digest}", "image.tag=v9"]):
        (container,) = pod_spec(render(*sets))["containers"]
        assert container["image"] == f"{PLACEHOLDER_REPOSITORY}@{digest}", sets
    (container,) = pod_spec(render("image.tag=v9"))["containers"]
    assert container["image"] == f"{PLACEHOLDER_REPOSITORY}:v9"
    (container,) = pod_spec(render())["containers"]
    app_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    assert container["image"] == f"{PLACEHOLDER_REPOSITORY}:{app_version}"  # no tag: the chart's appVersion
    assert "/image/digest" in render_error("image.digest=ab" * 2)


def test_without_an_image_the_chart_says_what_to_set() -> None:
    """The chart names no image of its own: `helm install` from a checkout without image values fails with a
    message naming the values to set and the page that says how to build and push the image."""
    for sets in ((), ("image.tag=v9",), ("image.digest=sha256:" + "ab" * 32,), ("image.repository=",)):
        out = render_error(*sets, image=False)
        assert "image.repository is not set" in out, (sets, out)
        assert "image.tag" in out and "image.digest" in out and "docs/installation.md" in out, out
    # `helm lint` (a chart repository's checks) passes the chart as committed and notes the missing value.
    lint = helm("lint", "--strict", str(CHART), check=False)
    assert "0 chart(s) failed" in lint and "Missing required value: image.repository is not set" in lint, lint


def test_revision_history_limit() -> None:
    (deployment,) = find(render(), "Deployment")
    assert deployment["spec"]["revisionHistoryLimit"] == 10
    (deployment,) = find(render("revisionHistoryLimit=0"), "Deployment")
    assert deployment["spec"]["revisionHistoryLimit"] == 0
    assert "/revisionHistoryLimit" in render_error("revisionHistoryLimit=-1")


def test_topology_spread_constraints() -> None:
    assert "topologySpreadConstraints" not in pod_spec(render())
    spread = pod_spec(
        render(
            *HA,
            "topologySpreadConstraints[0].maxSkew=1",
            "topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone",
            "topologySpreadConstraints[0].whenUnsatisfiable=DoNotSchedule",
            "topologySpreadConstraints[0].labelSelector.matchLabels.app\\.kubernetes\\.io/name=liqo-peering-operator",
        )
    )["topologySpreadConstraints"]
    assert spread == [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "liqo-peering-operator"}},
        }
    ]


def test_extra_volumes_and_mounts() -> None:
    pod = pod_spec(
        render(
            "extraVolumes[0].name=ca",
            "extraVolumes[0].configMap.name=ca-bundle",
            "extraVolumeMounts[0].name=ca",
            "extraVolumeMounts[0].mountPath=/etc/ssl/ca",
            "extraVolumeMounts[0].readOnly=true",
        )
    )
    # The chart's own volumes (scratch, pass markers) stay, the extra one comes after them.
    assert [v["name"] for v in pod["volumes"]] == ["tmp", "pass-markers", "ca"]
    assert pod["volumes"][2] == {"name": "ca", "configMap": {"name": "ca-bundle"}}
    (container,) = pod["containers"]
    assert container["volumeMounts"][2:] == [{"name": "ca", "mountPath": "/etc/ssl/ca", "readOnly": True}]


def test_pass_markers_live_in_an_empty_dir_that_outlives_the_container() -> None:
    pod = pod_spec(render())
    (container,) = pod["containers"]
    mount = next(m for m in container["volumeMounts"] if m["name"] == "pass-markers")
    assert f"--pass-markers-dir={mount['mountPath']}" in container["args"]
    assert "emptyDir" in next(v for v in pod["volumes"] if v["name"] == "pass-markers")


def pdb(*sets: str) -> dict[str, Any] | None:
    found = find(render(*sets), "PodDisruptionBudget")
    return found[0]["spec"] if found else None


def test_pod_disruption_budget() -> None:
    selector = {"matchLabels": {"app.kubernetes.io/name": "liqo-peering-operator", "app.kubernetes.io/instance": "lpo"}}
    assert pdb(*HA) == {"minAvailable": 1, "selector": selector}
    assert pdb(*HA, "podDisruptionBudget.minAvailable=50%") == {"minAvailable": "50%", "selector": selector}
    assert pdb(*HA, "podDisruptionBudget.minAvailable=", "podDisruptionBudget.maxUnavailable=1") == {
        "maxUnavailable": 1,
        "selector": selector,
    }
    assert pdb(*HA, "podDisruptionBudget.minAvailable=null", "podDisruptionBudget.maxUnavailable=25%") == {
        "maxUnavailable": "25%",
        "selector": selector,
    }
    # Off when asked, and never for one replica, whose budget would block every drain.
    assert pdb(*HA, "podDisruptionBudget.enabled=false") is None
    assert pdb() is None and pdb("ha.enabled=true") is None
    assert "not both" in render_error(*HA, "podDisruptionBudget.maxUnavailable=1")
    assert "/podDisruptionBudget/minAvailable" in render_error(*HA, "podDisruptionBudget.minAvailable=half")


def test_zero_replicas_keep_the_service_account_and_rbac() -> None:
    docs = render("replicaCount=0")
    (deployment,) = find(docs, "Deployment")
    assert deployment["spec"]["replicas"] == 0
    assert find(docs, "ServiceAccount") and find(docs, "ClusterRole") and find(docs, "ClusterRoleBinding")
    assert pdb("ha.enabled=true", "replicaCount=0") is None
    assert "/replicaCount" in render_error("replicaCount=-1")


def test_global_and_enabled_are_accepted() -> None:
    docs = render("global.imageRegistry=registry.example", "global.anything.nested=1", "enabled=true")
    assert len(find(docs, "Deployment")) == 1
    assert "/enabled" in render_error("enabled=yes-please")


def test_as_a_subchart_with_global_values(tmp_path: Path) -> None:
    parent = tmp_path / "platform"
    (parent / "templates").mkdir(parents=True)
    (parent / "Chart.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v2",
                "name": "platform",
                "version": "1.0.0",
                "icon": "https://example.com/icon.png",
                "dependencies": [
                    {
                        "name": "liqo-peering-operator",
                        "version": yaml.safe_load((CHART / "Chart.yaml").read_text())["version"],
                        "repository": f"file://{CHART}",
                        "condition": "liqo-peering-operator.enabled",
                    }
                ],
            }
        )
    )
    # Globals the subchart does not know (as other subcharts of an umbrella chart have), and its own values.
    (parent / "values.yaml").write_text(
        yaml.safe_dump(
            {
                "global": {"imageRegistry": "registry.example", "storageClass": "fast", "labels": {"a": "b"}},
                "liqo-peering-operator": {
                    "enabled": True,
                    "commonLabels": {"platform": "edge"},
                    "image": {"repository": PLACEHOLDER_REPOSITORY},
                },
            }
        )
    )
    (parent / "templates" / "configmap.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: platform\n"
        "data:\n  registry: {{ .Values.global.imageRegistry }}\n"
    )
    helm("dependency", "build", str(parent))
    assert (parent / "charts").is_dir() and list((parent / "charts").glob("liqo-peering-operator-*.tgz"))
    out = helm("lint", "--strict", str(parent))
    assert "0 chart(s) failed" in out and "[WARNING]" not in out and "[ERROR]" not in out, out

    docs = render(chart=parent)
    (deployment,) = find(docs, "Deployment", FULLNAME)
    assert deployment["metadata"]["labels"]["platform"] == "edge"
    assert find(docs, "ConfigMap", "platform")
    assert find(docs, "CustomResourceDefinition")
    off = render("liqo-peering-operator.enabled=false", chart=parent)
    assert [d["kind"] for d in off] == ["ConfigMap"]


# -- NetworkPolicy -----------------------------------------------------------------------------------------


def policy(*sets: str) -> dict[str, Any]:
    (found,) = find(render("networkPolicy.enabled=true", API_SERVER, *sets), "NetworkPolicy")
    spec: dict[str, Any] = found["spec"]
    return spec


def test_no_network_policy_unless_enabled_and_it_needs_the_api_server() -> None:
    assert not find(render(), "NetworkPolicy")
    assert "networkPolicy.apiServer.cidrs" in render_error("networkPolicy.enabled=true")


def test_network_policy_isolates_the_operator_pods_both_ways() -> None:
    spec = policy()
    (deployment,) = find(render(), "Deployment")
    assert spec["podSelector"] == deployment["spec"]["selector"]
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    # Nothing in but from the pod's own node (always allowed): no peer was named.
    assert spec["ingress"] == []
    dns, api = spec["egress"]
    assert dns == {
        "to": [
            {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
            }
        ],
        "ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}],
    }
    assert api == {
        "to": [{"ipBlock": {"cidr": "10.0.0.10/32"}}],
        "ports": [{"port": 443, "protocol": "TCP"}, {"port": 6443, "protocol": "TCP"}],
    }


def test_network_policy_lets_in_only_the_named_peers_on_the_metrics_and_health_ports() -> None:
    monitoring = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    prometheus = {**monitoring, "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}
    spec = policy(
        "networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=monitoring",
        "networkPolicy.metricsFrom[0].podSelector.matchLabels.app\\.kubernetes\\.io/name=prometheus",
        "networkPolicy.healthFrom[0].namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=monitoring",
        "networkPolicy.healthFrom[1].ipBlock.cidr=192.0.2.0/24",
        "metrics.port=9090",
        "health.port=9091",
    )
    assert spec["ingress"] == [
        {"from": [prometheus], "ports": [{"port": 9090, "protocol": "TCP"}]},
        {"from": [monitoring, {"ipBlock": {"cidr": "192.0.2.0/24"}}], "ports": [{"port": 9091, "protocol": "TCP"}]},
    ]


def test_network_policy_lets_out_to_the_providers_and_the_extra_rules() -> None:
    spec = policy(
        "networkPolicy.apiServer.ports={6443}",
        "networkPolicy.providers.cidrs={203.0.113.7/32,198.51.100.0/28}",
        "networkPolicy.providers.ports={6443}",
        "networkPolicy.dns.to[0].ipBlock.cidr=169.254.20.10/32",
        "networkPolicy.dns.port=1053",
        "networkPolicy.extraEgress[0].to[0].ipBlock.cidr=192.0.2.80/32",
        "networkPolicy.extraEgress[0].ports[0].port=3128",
        "networkPolicy.extraIngress[0].from[0].podSelector.matchLabels.role=debug",
    )
    dns, api, providers, proxy = spec["egress"]
    assert dns["to"] == [{"ipBlock": {"cidr": "169.254.20.10/32"}}]
    assert {p["port"] for p in dns["ports"]} == {1053}
    assert api["ports"] == [{"port": 6443, "protocol": "TCP"}]
    assert providers == {
        "to": [{"ipBlock": {"cidr": "203.0.113.7/32"}}, {"ipBlock": {"cidr": "198.51.100.0/28"}}],
        "ports": [{"port": 6443, "protocol": "TCP"}],
    }
    assert proxy == {"to": [{"ipBlock": {"cidr": "192.0.2.80/32"}}], "ports": [{"port": 3128}]}
    assert spec["ingress"] == [{"from": [{"podSelector": {"matchLabels": {"role": "debug"}}}]}]


def test_network_policy_values_are_checked() -> None:
    assert "/networkPolicy/apiServer/cidrs/0" in render_error("networkPolicy.apiServer.cidrs={10.0.0.10}")
    assert "/networkPolicy/providers/cidrs/0" in render_error("networkPolicy.providers.cidrs={api.example.com}")
    assert "/networkPolicy/metricsFrom/0" in render_error("networkPolicy.metricsFrom[0].namespace=monitoring")
    assert "/networkPolicy/providers/ports/0" in render_error("networkPolicy.providers.ports={0}")
