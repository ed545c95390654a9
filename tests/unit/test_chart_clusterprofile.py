"""The chart's clusterProfiles values: the provider file in a ConfigMap given with the flag, the plugins from an
image (an init container into an emptyDir, or an image volume), and rights only when the feature is on: read
only on ClusterProfiles where LiqoPeerings are watched, and get on the secretreader plugin's Secrets by name."""

from __future__ import annotations

import json
from typing import Any

from liqo_peering.clusterprofile import load_provider_file
from unit.chart import FULLNAME, NAMESPACE, find, pod_spec, render, render_error
from unit.test_chart_options import CLUSTER_PROFILES

FLAG = "--clusterprofile-provider-file=/etc/liqo-peering-operator/clusterprofile/providers.json"
PLUGINS = "/var/lib/liqo-peering-operator/plugins"


def profile_rules(docs: list[dict[str, Any]]) -> list[tuple[str, str | None, dict[str, Any]]]:
    """(kind, namespace, rule) of every rule on ClusterProfiles."""
    return [
        (d["kind"], d["metadata"].get("namespace"), r)
        for kind in ("ClusterRole", "Role")
        for d in find(docs, kind)
        for r in d.get("rules") or []
        if "clusterprofiles" in r["resources"]
    ]


def secret_gets(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for d in find(docs, "Role", f"{FULLNAME}-secretreader") for r in d["rules"]]


def test_off_by_default_no_right_flag_or_volume() -> None:
    docs = render()
    assert profile_rules(docs) == [] and secret_gets(docs) == []
    assert not find(docs, "ConfigMap", f"{FULLNAME}-clusterprofile-providers")
    spec = pod_spec(docs)
    assert FLAG not in spec["containers"][0]["args"] and "initContainers" not in spec


def test_the_provider_file_is_rendered_mounted_and_read_by_the_operator() -> None:
    docs = render(*CLUSTER_PROFILES)
    (config,) = find(docs, "ConfigMap", f"{FULLNAME}-clusterprofile-providers")
    providers = load_provider_file(config["data"]["providers.json"].encode(), "the chart's file")
    assert providers.names == ("secretreader",)
    assert providers.providers[0].exec.command == f"{PLUGINS}/secretreader-plugin"
    spec = pod_spec(docs)
    container = spec["containers"][0]
    assert FLAG in container["args"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["clusterprofile-providers"]["mountPath"] == "/etc/liqo-peering-operator/clusterprofile"
    assert mounts["clusterprofile-plugins"] == {
        "name": "clusterprofile-plugins",
        "mountPath": PLUGINS,
        "readOnly": True,
    }
    # A new provider file rolls the Pod: the operator reads it at start.
    annotations = find(docs, "Deployment")[0]["spec"]["template"]["metadata"]["annotations"]
    assert "checksum/clusterprofile-providers" in annotations


def test_plugins_come_from_an_init_container_or_an_image_volume() -> None:
    spec = pod_spec(render(*CLUSTER_PROFILES))
    (init,) = spec["initContainers"]
    assert init["image"] == "example.io/plugins:1"
    assert init["env"] == [{"name": "PLUGINS_DIR", "value": PLUGINS}]
    assert init["securityContext"] == spec["containers"][0]["securityContext"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert "emptyDir" in volumes["clusterprofile-plugins"]
    spec = pod_spec(render(*CLUSTER_PROFILES, "clusterProfiles.plugins.imageVolume=true"))
    assert "initContainers" not in spec
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["clusterprofile-plugins"]["image"] == {
        "reference": "example.io/plugins:1",
        "pullPolicy": "IfNotPresent",
    }


def test_clusterprofiles_are_read_only_where_liqopeerings_are_watched() -> None:
    everywhere = profile_rules(render(*CLUSTER_PROFILES))
    assert [(kind, ns) for kind, ns, _ in everywhere] == [("ClusterRole", None)]
    scoped = profile_rules(render("watchNamespaces={team-a,team-b}", *CLUSTER_PROFILES))
    assert sorted((kind, ns) for kind, ns, _ in scoped) == [("Role", "team-a"), ("Role", "team-b")]
    for _, _, rule in everywhere + scoped:
        assert rule == {
            "apiGroups": ["multicluster.x-k8s.io"],
            "resources": ["clusterprofiles"],
            "verbs": ["get", "list", "watch"],
        }


def test_the_secretreader_plugin_gets_its_secrets_by_name_in_the_release_namespace_only() -> None:
    docs = render("watchNamespaces={team-a}", *CLUSTER_PROFILES)
    (role,) = find(docs, "Role", f"{FULLNAME}-secretreader")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["edge-1"], "verbs": ["get"]}
    ]
    (binding,) = find(docs, "RoleBinding", f"{FULLNAME}-secretreader")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": FULLNAME, "namespace": NAMESPACE}]
    assert binding["roleRef"]["name"] == f"{FULLNAME}-secretreader"
    # No names: no grant at all (never every Secret of the namespace).
    names = [s for s in CLUSTER_PROFILES if not s.startswith("clusterProfiles.secretReader")]
    assert secret_gets(render(*names)) == []


def test_enabled_without_providers_is_refused() -> None:
    assert "clusterProfiles.providers" in render_error("clusterProfiles.enabled=true")


def test_the_provider_file_is_json_of_the_values() -> None:
    docs = render(*CLUSTER_PROFILES)
    (config,) = find(docs, "ConfigMap", f"{FULLNAME}-clusterprofile-providers")
    assert json.loads(config["data"]["providers.json"])["providers"][0]["name"] == "secretreader"
