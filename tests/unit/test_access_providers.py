"""ClusterProfiles and access providers (liqo_peering/clusterprofile.py): the provider file read within bounds,
the access provider chosen in file order, the cluster vetted like any remote kubeconfig, and what a
ClusterProfile may add to the plugin only as the administrator's policy allows."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from liqo_peering import clusterprofile as cp
from liqo_peering.engine import discovery, watches
from liqo_peering.errors import ClusterProfileNotFound, ClusterProfileUnhealthy, NoAccessProvider
from liqo_peering.kubeconfig import KubeconfigError, KubeconfigInvalid, KubeconfigUnsafe
from liqo_peering.liqo import resources as r
from unit.fakes import FakeClusterClient

CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").decode()
SECRETREADER: dict[str, Any] = {
    "name": "secretreader",
    "execConfig": {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": "/plugins/secretreader-plugin",
        "args": None,
        "env": None,
        "provideClusterInfo": True,
    },
}
OTHER: dict[str, Any] = {
    "name": "other",
    "execConfig": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "/plugins/other", "args": ["-v"]},
}


def providers(*items: dict[str, Any]) -> cp.AccessProviders:
    return cp.load_provider_file(json.dumps({"providers": list(items)}).encode(), "providers.json")


def cluster(**extra: Any) -> dict[str, Any]:
    return {
        "server": "https://provider.example:6443",
        "certificate-authority-data": CA,
        "extensions": [{"name": cp.EXEC_EXTENSION, "extension": {"clusterName": "edge-1"}}],
        **extra,
    }


def profile(
    offered: dict[str, dict[str, Any]] | None = None,
    healthy: str | None = "True",
    field: str = "accessProviders",
) -> dict[str, Any]:
    status: dict[str, Any] = {
        field: [{"name": name, "cluster": c} for name, c in (offered or {"secretreader": cluster()}).items()]
    }
    if healthy is not None:
        status["conditions"] = [
            {"type": cp.HEALTHY, "status": healthy, "reason": "Probed", "message": "the API server answers"}
        ]
    return {"metadata": {"name": "edge-1", "namespace": "team-a"}, "status": status}


def kubeconfig(file: cp.AccessProviders, prof: dict[str, Any], tls: bool = False) -> Any:
    return cp.profile_kubeconfig(file, prof, "ClusterProfile team-a/edge-1", allow_insecure_tls=tls)


# -- the provider file -------------------------------------------------------------------------------------
def test_the_upstream_example_file_is_read() -> None:
    file = providers(SECRETREADER, OTHER)
    assert file.names == ("secretreader", "other")
    first = file.providers[0]
    assert first.exec == cp.ExecConfig("client.authentication.k8s.io/v1", "/plugins/secretreader-plugin", (), (), True)
    assert (first.args_policy, first.envs_policy) == ("Ignore", "Ignore")


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (b"x" * (cp.MAX_FILE_BYTES + 1), "larger than"),
        (b"{", "not JSON"),
        (b"[" * 5000 + b"]" * 5000, "not JSON"),  # nested past Python's recursion limit
        (json.dumps({"providers": [{**SECRETREADER, "x": [[[[[[[[1]]]]]]]]}]}).encode(), "deeper"),
        (b'{"providers": []}', "at least one"),
        (json.dumps({"providers": [SECRETREADER], "extra": 1}).encode(), "one field"),
        (json.dumps({"providers": [SECRETREADER] * (cp.MAX_PROVIDERS + 1)}).encode(), "more than"),
        (json.dumps({"providers": [SECRETREADER, SECRETREADER]}).encode(), "same name"),
        (json.dumps({"providers": [{**SECRETREADER, "execConfig": {"command": "/x"}}]}).encode(), "apiVersion"),
        (json.dumps({"providers": [{**SECRETREADER, "profileSourcedCLIArgsPolicy": "Always"}]}).encode(), "Append"),
        (json.dumps({"providers": [{**SECRETREADER, "profileSourcedEnvVarsPolicy": "Merge"}]}).encode(), "Replace"),
        (
            json.dumps({"providers": [{"name": "a", "execConfig": {**OTHER["execConfig"], "cmd": "x"}}]}).encode(),
            "fields",
        ),
    ],
)
def test_a_provider_file_that_cannot_be_used_is_refused_with_its_reason(raw: bytes, says: str) -> None:
    with pytest.raises(cp.ProviderFileError, match=says) as err:
        cp.load_provider_file(raw, "providers.json")
    assert str(err.value).startswith("providers.json")


def test_the_cli_stops_on_a_bad_file_and_reads_a_good_one(tmp_path: Any) -> None:
    from liqo_peering.cli import access_providers

    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps({"providers": [SECRETREADER]}))
    bad.write_text("{")
    assert access_providers(good).names == ("secretreader",)
    assert access_providers(None).providers == ()
    with pytest.raises(SystemExit, match="not JSON"):
        access_providers(bad)
    with pytest.raises(SystemExit, match="cannot be read"):
        access_providers(tmp_path / "absent.json")


# -- a ClusterProfile -------------------------------------------------------------------------------------
def test_the_kubeconfig_is_the_offered_cluster_and_the_administrators_plugin() -> None:
    found = kubeconfig(providers(SECRETREADER), profile())
    assert found.access_provider == "secretreader" and found.server == "https://provider.example:6443"
    (entry,) = found.config["clusters"]
    assert entry["cluster"]["certificate-authority-data"] == CA
    assert entry["cluster"]["extensions"] == [{"name": cp.EXEC_EXTENSION, "extension": {"clusterName": "edge-1"}}]
    (user,) = found.config["users"]
    assert user["user"] == {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": "/plugins/secretreader-plugin",
            "args": [],
            "env": [],
            "interactiveMode": "Never",
            "provideClusterInfo": True,
        }
    }
    told = cp.exec_cluster(found)
    assert told == {
        "server": "https://provider.example:6443",
        "certificate-authority-data": CA,
        "config": {"clusterName": "edge-1"},
    }
    assert cp.exec_config(found).command == "/plugins/secretreader-plugin"


def test_the_first_provider_of_the_file_wins_and_the_deprecated_field_is_read() -> None:
    both = profile({"other": cluster(server="https://other:6443"), "secretreader": cluster()})
    assert kubeconfig(providers(OTHER, SECRETREADER), both).access_provider == "other"
    assert kubeconfig(providers(SECRETREADER, OTHER), both).access_provider == "secretreader"
    old = profile(field="credentialProviders")
    assert kubeconfig(providers(SECRETREADER), old).access_provider == "secretreader"


def test_no_provider_in_common_or_none_at_all_is_no_access_provider() -> None:
    with pytest.raises(NoAccessProvider, match=r"it offers: secretreader; the operator's: other"):
        kubeconfig(providers(OTHER), profile())
    with pytest.raises(NoAccessProvider, match="--clusterprofile-provider-file"):
        kubeconfig(cp.AccessProviders(), profile())


@pytest.mark.parametrize("healthy", ["False", "Unknown", None])
def test_a_profile_whose_control_plane_is_not_healthy_is_refused(healthy: str | None) -> None:
    with pytest.raises(ClusterProfileUnhealthy, match=cp.HEALTHY) as err:
        kubeconfig(providers(SECRETREADER), profile(healthy=healthy))
    if healthy is not None:
        assert "Probed: the API server answers" in err.value.message
    # Unpeering tries anyway.
    found = cp.profile_kubeconfig(
        providers(SECRETREADER), profile(healthy=healthy), "x", allow_insecure_tls=False, healthy=False
    )
    assert found.access_provider == "secretreader"


def test_a_long_condition_message_is_cut_short() -> None:
    prof = profile(healthy="False")
    prof["status"]["conditions"][0]["message"] = "m" * 100_000
    with pytest.raises(ClusterProfileUnhealthy) as err:
        kubeconfig(providers(SECRETREADER), prof)
    assert len(err.value.message) < 1000


@pytest.mark.parametrize(
    ("offered", "error", "says"),
    [
        (cluster(server="http://provider.example"), KubeconfigUnsafe, "http://"),
        (cluster(server=""), KubeconfigInvalid, "no 'server'"),
        ({**cluster(), "certificate-authority": "/etc/passwd"}, KubeconfigUnsafe, "refers to files"),
        (cluster(**{"insecure-skip-tls-verify": True}), KubeconfigUnsafe, "insecure-skip-tls-verify"),
        (cluster(**{"proxy-url": "file:///x"}), KubeconfigInvalid, "proxy-url"),
        (cluster(extensions=[{"name": "x", "extension": "y" * cp.MAX_CLUSTER_BYTES}]), KubeconfigInvalid, "larger"),
        (cluster(extensions={"not": "a list"}), KubeconfigInvalid, "extensions"),
        ("not an object", KubeconfigInvalid, "must be an object"),
    ],
)
def test_the_offered_cluster_is_vetted_like_a_remote_kubeconfig(
    offered: Any, error: type[KubeconfigError], says: str
) -> None:
    with pytest.raises(error, match=says) as err:
        kubeconfig(providers(SECRETREADER), profile({"secretreader": offered}))
    assert "ClusterProfile team-a/edge-1, access provider 'secretreader'" in err.value.message


ADDED: list[dict[str, Any]] = [
    {"name": cp.ARGS_EXTENSION, "extension": ["--region", "eu"]},
    {"name": cp.ENVS_EXTENSION, "extension": {"REGION": "eu", "MODE": "profile"}},
]


def with_policies(args: str = "", envs: str = "") -> dict[str, Any]:
    execution = {**OTHER["execConfig"], "env": [{"name": "MODE", "value": "admin"}]}
    policies = {"profileSourcedCLIArgsPolicy": args, "profileSourcedEnvVarsPolicy": envs}
    return {"name": "other", "execConfig": execution, **{k: v for k, v in policies.items() if v}}


def plugin_of(provider: dict[str, Any], extensions: list[dict[str, Any]]) -> cp.ExecConfig:
    prof = profile({"other": cluster(extensions=extensions)})
    return cp.exec_config(kubeconfig(providers(provider), prof))


def test_what_a_profile_adds_to_the_plugin_is_ignored_by_default() -> None:
    plugin = plugin_of(with_policies(), ADDED)
    assert plugin.args == ("-v",) and plugin.env == (("MODE", "admin"),)


def test_what_a_profile_adds_is_used_as_the_policy_allows() -> None:
    plugin = plugin_of(with_policies("Append", "AppendIfNotExists"), ADDED)
    assert plugin.args == ("-v", "--region", "eu")
    assert dict(plugin.env) == {"MODE": "admin", "REGION": "eu"}
    assert dict(plugin_of(with_policies(envs="Replace"), ADDED).env) == {"MODE": "profile", "REGION": "eu"}


@pytest.mark.parametrize(
    "extension",
    [
        {"name": cp.ENVS_EXTENSION, "extension": {"LD_PRELOAD": "/tmp/x.so"}},
        {"name": cp.ENVS_EXTENSION, "extension": {"KUBERNETES_EXEC_INFO": "{}"}},
        {"name": cp.ENVS_EXTENSION, "extension": {"PATH": "/tmp"}},
        {"name": cp.ENVS_EXTENSION, "extension": {"not a name": "x"}},
        {"name": cp.ENVS_EXTENSION, "extension": {f"V{i}": "x" for i in range(cp.MAX_PROFILE_ENVS + 1)}},
        {"name": cp.ARGS_EXTENSION, "extension": ["x"] * (cp.MAX_PROFILE_ARGS + 1)},
        {"name": cp.ARGS_EXTENSION, "extension": "--not-a-list"},
    ],
)
def test_what_a_profile_adds_is_bounded_and_never_changes_how_programs_load(extension: dict[str, Any]) -> None:
    with pytest.raises(KubeconfigInvalid):
        plugin_of(with_policies("Append", "Replace"), [extension])


def test_a_hostile_status_is_read_within_bounds() -> None:
    prof = profile()
    entries = [{"name": f"p{i}", "cluster": cluster()} for i in range(10_000)]
    prof["status"]["accessProviders"] = [*entries, {"name": "secretreader", "cluster": cluster()}]
    with pytest.raises(NoAccessProvider):  # beyond the entries read
        kubeconfig(providers(SECRETREADER), prof)
    prof["status"]["accessProviders"] = [None, 3, {"name": ["x"]}, {"name": "secretreader", "cluster": cluster()}]
    assert kubeconfig(providers(SECRETREADER), prof).access_provider == "secretreader"
    statuses: list[Any] = [None, [], {"conditions": "x", "accessProviders": {"x": 1}}]
    for status in statuses:
        with pytest.raises(ClusterProfileUnhealthy):
            kubeconfig(providers(SECRETREADER), {"status": status})


# -- the engine: reading it, and what wakes the peering ------------------------------------------------------
def policy(*items: dict[str, Any]) -> discovery.KubeconfigPolicy:
    return discovery.KubeconfigPolicy(access_providers=providers(*items) if items else cp.AccessProviders())


def test_the_engine_reads_the_profile_of_the_peering() -> None:
    local = FakeClusterClient("consumer")
    with pytest.raises(ClusterProfileNotFound, match="LiqoPeering team-a/p: ClusterProfile team-a/edge-1 not found"):
        discovery.read_profile_kubeconfig(local, "team-a", "p", "edge-1", policy(SECRETREADER))
    local.add(
        r.CLUSTER_PROFILE, {"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile", **profile()}
    )
    found = discovery.read_profile_kubeconfig(local, "team-a", "p", "edge-1", policy(SECRETREADER))
    assert found.access_provider == "secretreader"


def test_without_providers_nothing_is_read() -> None:
    local = FakeClusterClient("consumer")
    with pytest.raises(NoAccessProvider, match="LiqoPeering team-a/p: "):
        discovery.read_profile_kubeconfig(local, "team-a", "p", "edge-1", policy())
    assert local.reads == []


def test_a_cluster_without_the_crd_says_so_and_retries() -> None:
    local = FakeClusterClient("consumer", not_served={"clusterprofiles"})
    with pytest.raises(ClusterProfileNotFound, match="does not serve clusterprofiles") as err:
        discovery.read_profile_kubeconfig(local, "team-a", "p", "edge-1", policy(SECRETREADER))
    assert err.value.transient


def test_the_profile_wakes_the_peering_as_a_kubeconfig_change() -> None:
    local = FakeClusterClient("consumer")
    routes = watches.peering_routes(local, None, None, None, profile=("team-a", "edge-1"), minted_secret="m")
    (route,) = [x for x in routes if x.scope.res == r.CLUSTER_PROFILE]
    assert route.scope.namespace == "team-a" and route.scope.fields == "metadata.name=edge-1"
    assert route.wake_as == watches.KUBECONFIG and route.matches(
        {"metadata": {"namespace": "team-a", "name": "edge-1"}}
    )
    assert not [x for x in routes if x.scope.res == r.SECRET and x.scope.fields]  # no kubeconfig Secret
    assert not watches.unscoped(route.scope)
