"""The operator end to end: two local clusters, Liqo's objects and stand-in, the operator as a process."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import time
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

import common_metadata
import yaml
from admission_cases import admission_failures
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from liqo_peering.liqo import naming
from liqo_peering.liqo import peeringuser as pu
from testenv import audit, liqo_info
from testenv import kube as k
from testenv.kube import Kube
from testenv.liqo_env.pytest_plugin import LIQO_SETTINGS
from testenv.localk8s import tool_path
from testenv.operator_support import (
    SECRET,
    PeeringCase,
    custom,
    get,
    items,
    liqo_objects_left,
    tenant_ns,
    wait_for,
)
from testenv.reactions import OPERATOR_AGENT, peering_steps, reactions

NAME = "provider"


def spec(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"remoteKubeconfigSecretRef": {"name": SECRET}, "timeout": "2m"}
    base.update(overrides)
    return base


def test_peering_becomes_ready_with_every_object_on_the_right_cluster(case: PeeringCase) -> None:
    env, ns = case.env, case.namespace
    consumer, provider = env.peerings.api, env.provider_api
    case.peerings.create(
        ns,
        NAME,
        spec(
            offloading={"resources": {"cpu": 2, "memory": "4Gi", "nvidia.com/gpu": 1}},
            commonMetadata=common_metadata.SPEC,
        ),
    )
    status = case.peerings.wait_status(ns, NAME, "ready")

    assert status["localClusterID"] == env.consumer_id
    assert status["remoteClusterID"] == env.provider_id
    assert status["observedGeneration"] == case.peerings.get(ns, NAME)["metadata"]["generation"]  # type: ignore[index]
    conds = {c["type"]: c for c in status["conditions"]}
    for cond_type in ("Ready", "NetworkReady", "AuthenticationReady", "OffloadingReady"):
        assert conds[cond_type]["status"] == "True", conds[cond_type]
    assert conds["Reconciling"]["status"] == "False" and conds["Stalled"]["status"] == "False"
    assert status["readyAt"] and status["startedAt"]
    # Ready comes from the stages' own signals; Liqo's ForeignCluster aggregate may follow a little later,
    # and the mirror follows it.
    healthy = {"networking": "Healthy", "authentication": "Healthy", "offloading": "Healthy"}

    def mirrored_health() -> dict[str, str]:
        mods = (case.peerings.status(ns, NAME).get("foreignCluster") or {}).get("modules") or {}
        return {m: (mods.get(m) or {}).get("health", "") for m in healthy}

    wait_for("the ForeignCluster mirror to report every module Healthy", lambda: mirrored_health() == healthy)
    assert case.peerings.status(ns, NAME)["foreignCluster"]["role"] in ("Provider", "ConsumerAndProvider")

    # Each step followed what it waits for, in order (from the API servers' audit logs). How soon is a
    # benchmark's question (make bench), not a test's: on a loaded machine any bound would only measure the load.
    created = datetime.fromisoformat(case.peerings.get(ns, NAME)["metadata"]["creationTimestamp"])  # type: ignore[index]
    events = {side: audit.writes(env.lc[side].audit_log, since=created) for side in ("consumer", "provider")}
    steps = peering_steps(env.consumer_id, env.provider_id)
    found = reactions(events, steps)
    assert [r.step for r in found] == [s.name for s in steps]

    # Every watch the operator opened on the consumer (this peering's and any earlier test's) carries a
    # selector: what it holds follows its peerings, not the consumer's other Deployments and Secrets. Its
    # own LiqoPeerings it holds whole, as kopf does (the sweep of protected Secrets, engine/sweep.py), cluster-wide
    # or, when an earlier test scoped it with watchNamespaces, per namespace.
    watched = [
        (e.resource, e.namespace, parse_qs(urlsplit(e.request_uri).query))
        for e in audit.watches(env.lc["consumer"].audit_log, user_agent_prefix=OPERATOR_AGENT)
    ]
    whole = [w for w in watched if w[0] in ("liqopeerings", "liqopeeringsets")]
    assert [w for w in whole if w[0] == "liqopeerings" and w[1] is None]
    watched = [w for w in watched if w not in whole]
    assert watched and not [w for w in watched if not ({"labelSelector", "fieldSelector"} & set(w[2]))]
    assert ("deployments", None, ["networking.liqo.io/component=gateway"]) in [
        (res, where, query.get("labelSelector")) for res, where, query in watched
    ]
    assert ("secrets", ns, [f"metadata.name={SECRET}"]) in [
        (res, where, query.get("fieldSelector")) for res, where, query in watched
    ]

    c_ns, p_ns = tenant_ns(consumer, env.provider_id), tenant_ns(provider, env.consumer_id)
    # Networking: each side's Configuration describes the other cluster.
    c_conf = get(consumer, "networking.liqo.io", "configurations", c_ns, env.provider_id)
    p_conf = get(provider, "networking.liqo.io", "configurations", p_ns, env.consumer_id)
    assert c_conf and c_conf["spec"]["remote"]["cidr"]["pod"] == [LIQO_SETTINGS["provider"][1]]
    assert p_conf and p_conf["spec"]["remote"]["cidr"]["external"] == [LIQO_SETTINGS["consumer"][2]]
    server = get(provider, "networking.liqo.io", "gatewayservers", p_ns, env.consumer_id)
    assert server and server["spec"]["endpoint"]["port"] == 51840
    assert server["spec"]["endpoint"]["serviceType"] == "LoadBalancer" and server["spec"]["mtu"] == 1340
    client = get(consumer, "networking.liqo.io", "gatewayclients", c_ns, env.provider_id)
    assert client and client["spec"]["endpoint"]["addresses"] == server["status"]["endpoint"]["addresses"]
    assert get(consumer, "networking.liqo.io", "publickeies", c_ns, env.provider_id)
    assert get(provider, "networking.liqo.io", "publickeies", p_ns, env.consumer_id)
    # Authentication: Tenant on the provider, Identity on the consumer.
    tenant = get(provider, "authentication.liqo.io", "tenants", p_ns, env.consumer_id)
    assert tenant and tenant["spec"]["clusterID"] == env.consumer_id and tenant["status"]["authParams"]
    identity = get(consumer, "authentication.liqo.io", "identities", c_ns, f"controlplane-{env.provider_id}")
    assert identity and identity["spec"]["type"] == "ControlPlane"
    # Offloading: the ResourceSlice asks for what the spec says; the VirtualNode runs.
    rs = get(consumer, "authentication.liqo.io", "resourceslices", c_ns, env.provider_id)
    assert rs and rs["spec"]["resources"] == {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": "1"}
    assert rs["metadata"]["labels"]["liqo.io/replication"] == "true"
    assert get(consumer, "offloading.liqo.io", "virtualnodes", c_ns, env.provider_id)
    # Everything we made carries our labels, so the operator can find a peering's objects.
    assert rs["metadata"]["labels"]["peering.liqo-operator.io/peering-name"] == NAME
    reasons = {e.reason for e in case.peerings.events(ns, NAME)}
    assert {"PeeringReady", "NetworkReady", "AuthenticationReady", "OffloadingReady"} <= reasons
    # spec.commonMetadata: on everything the peering made on both clusters; a change reaches each in place.
    common_metadata.check_then_change({"consumer": consumer, "provider": provider}, case.peerings, ns, NAME)
    case.peerings.wait_status(ns, NAME, "ready")

    # What `liqoctl info peer` shows is in the status, as the stand-in's objects on both clusters say it.
    wait_for(
        "the status to show the CIDRs, gateway, ResourceSlice, virtual node and API server of Liqo's objects",
        lambda: (
            liqo_info.from_status(case.peerings.status(ns, NAME))
            == liqo_info.from_liqo(consumer, provider, env.consumer_id, env.provider_id)
        ),
        timeout=30,
    )
    status = case.peerings.status(ns, NAME)
    assert status["network"]["provider"]["podCIDRs"] == [LIQO_SETTINGS["provider"][1]]
    assert status["network"]["consumer"]["externalCIDRs"] == [LIQO_SETTINGS["consumer"][2]]
    assert status["gateway"] == {
        "server": "Provider",
        "addresses": server["status"]["endpoint"]["addresses"],
        "port": server["status"]["endpoint"]["port"],
        "protocol": "UDP",
    }
    (shown,) = status["resourceSlices"]
    assert (shown["name"], shown["action"], shown["accepted"]) == (env.provider_id, "Consuming", True)
    assert shown["requested"] == {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": "1"} == shown["granted"]
    assert [v["name"] for v in status["virtualNodes"] if v["ready"]] == [env.provider_id]
    assert status["apiServer"]["address"] == identity["spec"]["authParams"]["apiServer"]


def test_networking_disabled_and_no_virtual_node(case: PeeringCase) -> None:
    env, ns = case.env, case.namespace
    case.peerings.create(ns, NAME, spec(networking={"enabled": False}, offloading={"createVirtualNode": False}))
    status = case.peerings.wait_status(ns, NAME, "ready")
    conds = {c["type"]: c for c in status["conditions"]}
    assert conds["NetworkReady"]["reason"] == "Disabled"
    c_ns, p_ns = tenant_ns(env.peerings.api, env.provider_id), tenant_ns(env.provider_api, env.consumer_id)
    assert items(env.provider_api, "networking.liqo.io", "gatewayservers", p_ns) == []
    assert items(env.peerings.api, "networking.liqo.io", "configurations", c_ns) == []
    rs = get(env.peerings.api, "authentication.liqo.io", "resourceslices", c_ns, env.provider_id)
    assert rs and rs["metadata"]["annotations"]["liqo.io/create-virtual-node"] == "false"
    assert items(env.peerings.api, "offloading.liqo.io", "virtualnodes", c_ns) == []
    status = case.peerings.status(ns, NAME)  # no network to show, and no virtual node
    assert "network" not in status and "gateway" not in status and "virtualNodes" not in status
    assert [s["accepted"] for s in status["resourceSlices"]] == [True]


def test_deleted_gateway_client_comes_back(case: PeeringCase) -> None:
    env, ns = case.env, case.namespace
    case.peerings.create(ns, NAME, spec())
    case.peerings.wait_status(ns, NAME, "ready")
    c_ns = tenant_ns(env.peerings.api, env.provider_id)
    old = get(env.peerings.api, "networking.liqo.io", "gatewayclients", c_ns, env.provider_id)
    assert old
    custom(env.peerings.api).delete_namespaced_custom_object(
        "networking.liqo.io", "v1beta1", c_ns, "gatewayclients", env.provider_id
    )

    def recreated() -> bool:
        new = get(env.peerings.api, "networking.liqo.io", "gatewayclients", c_ns, env.provider_id)
        return bool(new) and new["metadata"]["uid"] != old["metadata"]["uid"]  # type: ignore[index]

    wait_for("the GatewayClient to be re-created", recreated, timeout=60)
    case.peerings.wait_status(ns, NAME, "ready")


def test_delete_unpeers_both_sides(case: PeeringCase) -> None:
    env, ns = case.env, case.namespace
    case.peerings.create(ns, NAME, spec())
    case.peerings.wait_status(ns, NAME, "ready")
    c_ns, p_ns = tenant_ns(env.peerings.api, env.provider_id), tenant_ns(env.provider_api, env.consumer_id)
    case.peerings.delete(ns, NAME)
    case.peerings.wait_gone(ns, NAME)
    assert liqo_objects_left(env, c_ns, p_ns) == []

    # Every line about this peering names it and, from the moment its remote is known, the remote cluster
    # ID: kopf's own lines about the object (handlers, deletion) included.
    lines = [json.loads(line) for line in env.operator.log().splitlines() if line.startswith("{")]
    assert all("peering" in line for line in lines if line.get("logger") == "kopf.objects")
    ours = [line for line in lines if line.get("peering") == f"{ns}/{NAME}"]
    assert any(line["logger"] == "kopf.objects" for line in ours)
    first = next(i for i, line in enumerate(ours) if line.get("remote_cluster_id"))
    unlabelled = [line for line in ours[first:] if line.get("remote_cluster_id") != env.provider_id]
    assert not unlabelled, unlabelled


KEPT = "peering.liqo-operator.io/kubeconfig-in-use"


def test_the_kubeconfig_secret_is_kept_while_in_use_so_deleting_everything_at_once_unpeers(
    case: PeeringCase,
) -> None:
    """The Secret a LiqoPeering uses carries the operator's finalizer until no LiqoPeering uses it: switching
    to another Secret moves it, and deleting the namespace (Secret and LiqoPeering together, as
    `kubectl delete -f` or GitOps pruning do) still unpeers both sides."""
    env, ns, core = case.env, case.namespace, case.peerings.core
    other = "e2e.example/keep"  # another writer's finalizer: never lost
    core.patch_namespaced_secret(SECRET, ns, {"metadata": {"finalizers": [other]}})
    case.peerings.create(ns, NAME, spec())
    case.peerings.wait_status(ns, NAME, "ready")
    assert case.peerings.secret_finalizers(ns, SECRET) == [other, KEPT]

    case.peerings.put_kubeconfig_secret(ns, "second", env.provider_kubeconfig())
    case.peerings.patch(ns, NAME, {"spec": {"remoteKubeconfigSecretRef": {"name": "second"}}})
    wait_for(
        "the protection to move to the new Secret",
        lambda: (
            case.peerings.secret_finalizers(ns, SECRET) == [other]
            and case.peerings.secret_finalizers(ns, "second") == [KEPT]
        ),
        timeout=30,
    )
    core.patch_namespaced_secret(SECRET, ns, {"metadata": {"finalizers": None}})
    case.peerings.wait_status(ns, NAME, "ready")
    case.peerings.delete(ns, NAME)
    case.peerings.wait_gone(ns, NAME)
    assert case.peerings.secret_finalizers(ns, "second") == []  # released by the unpeering, not deleted

    # A namespace of its own, deleted whole: its Secret goes Terminating at once, and stays until unpeered.
    whole = f"{ns}-whole"[:63]
    case.peerings.make_namespace(whole)
    case.peerings.put_kubeconfig_secret(whole, SECRET, env.provider_kubeconfig())
    case.peerings.create(whole, NAME, spec())
    case.peerings.wait_status(whole, NAME, "ready")
    c_ns, p_ns = tenant_ns(env.peerings.api, env.provider_id), tenant_ns(env.provider_api, env.consumer_id)
    started = time.monotonic()
    core.delete_namespace(whole)
    wait_for(
        "the namespace deleted", lambda: not core.list_namespace(field_selector=f"metadata.name={whole}").items, 90
    )
    print(f"BENCH namespace with a Ready LiqoPeering deleted (unpeered) in {time.monotonic() - started:.1f}s")
    assert liqo_objects_left(env, c_ns, p_ns) == []


def test_timeout_is_reported_then_ready_once_things_complete(case: PeeringCase) -> None:
    ns = case.namespace
    case.standin.set_faults("both", connection="Never")
    case.peerings.create(ns, NAME, spec(timeout="5s"))
    status = case.peerings.wait_status(ns, NAME, "timeout", timeout=60)
    stalled = next(c for c in status["conditions"] if c["type"] == "Stalled")
    assert stalled["status"] == "True" and stalled["reason"] == "Timeout"
    wait_for(
        "a Warning Event Timeout",  # posted right after the status it describes
        lambda: any(e.reason == "Timeout" and e.type == "Warning" for e in case.peerings.events(ns, NAME)),
        timeout=15,
    )
    case.standin.set_faults("both", connection=None)
    status = case.peerings.wait_status(ns, NAME, "ready", timeout=90)
    assert next(c for c in status["conditions"] if c["type"] == "Stalled")["status"] == "False"


def test_resource_slice_denied_is_an_error(case: PeeringCase) -> None:
    case.standin.set_faults("both", resourceslice="Denied")
    case.peerings.create(case.namespace, NAME, spec())
    cond = case.peerings.wait_reason(case.namespace, NAME, "ResourceSliceDenied", timeout=90)
    # Liqo's reason and message are quoted, with the fix that matches them.
    assert "(ResourceSliceResourcesDenied: Denied by liqo-standin fault injection)" in cond["message"]
    assert "ask for fewer resources in spec.offloading.resources" in cond["message"]
    status = case.peerings.status(case.namespace, NAME)
    assert status["peerStatus"] == "error"
    (shown,) = status["resourceSlices"]
    assert (
        shown["accepted"] is False
        and {"type": "Resources", "status": "Denied"}.items()
        <= next(c for c in shown["conditions"] if c["type"] == "Resources").items()
    )
    # A provider on Liqo after v1.2.0 that turned its built-in default class off: set another class.
    case.standin.set_faults("both", resourceslice="DefaultClassDisabled")
    cond = wait_for(
        "the Ready message to quote DefaultResourceSliceClassDisabled",
        lambda: next(
            (
                c
                for c in case.peerings.status(case.namespace, NAME).get("conditions") or []
                if c["type"] == "Ready" and "DefaultResourceSliceClassDisabled" in c["message"]
            ),
            None,
        ),
        timeout=60,
    )
    assert (cond["reason"], cond["status"]) == ("ResourceSliceDenied", "False")
    assert "set spec.offloading.resourceSliceClass to a class the provider serves" in cond["message"]


def test_missing_secret_and_key(case: PeeringCase) -> None:
    ns = case.namespace
    case.peerings.create(ns, "nosecret", spec(remoteKubeconfigSecretRef={"name": "does-not-exist"}))
    cond = case.peerings.wait_reason(ns, "nosecret", "SecretNotFound")
    assert "does-not-exist" in cond["message"]
    case.peerings.create(ns, "nokey", spec(remoteKubeconfigSecretRef={"name": SECRET, "key": "other"}))
    cond = case.peerings.wait_reason(ns, "nokey", "SecretKeyMissing")
    assert "'other'" in cond["message"]
    # Creating the Secret afterwards is enough: the operator watches it.
    case.peerings.put_kubeconfig_secret(ns, "does-not-exist", case.env.provider_kubeconfig())
    case.peerings.wait_status(ns, "nosecret", "ready", timeout=120)
    case.peerings.delete(ns, "nosecret")
    case.peerings.wait_gone(ns, "nosecret")


def test_garbage_and_unsafe_kubeconfigs_are_refused_without_leaking_credentials(case: PeeringCase) -> None:
    ns = case.namespace
    case.peerings.put_kubeconfig_secret(ns, "garbage", b"{{{ this is not yaml: [")
    case.peerings.create(ns, "garbage", spec(remoteKubeconfigSecretRef={"name": "garbage"}))
    case.peerings.wait_reason(ns, "garbage", "KubeconfigInvalid")

    # An alias bomb (nine anchors, each a list of nine aliases of the previous one: 9**9 leaves once
    # expanded) is refused before anything is built from it; the operator goes on with the other peerings.
    bomb = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    bomb += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    case.peerings.put_kubeconfig_secret(ns, "bomb", ("\n".join(bomb) + "\n").encode())
    case.peerings.create(ns, "bomb", spec(remoteKubeconfigSecretRef={"name": "bomb"}))
    cond = case.peerings.wait_reason(ns, "bomb", "KubeconfigInvalid")
    assert "YAML anchors or aliases (line 1)" in cond["message"]

    token = "s3cr3t-T0KEN-that-must-never-leak-0123456789abcdef"
    config = yaml.safe_load(case.env.provider_kubeconfig())
    user = config["users"][0]["user"]
    user["token"] = token
    user["exec"] = {"apiVersion": "client.authentication.k8s.io/v1", "command": "/bin/steal", "args": [token]}
    case.peerings.put_kubeconfig_secret(ns, "exec", yaml.safe_dump(config).encode())
    case.peerings.create(ns, "exec", spec(remoteKubeconfigSecretRef={"name": "exec"}))
    cond = case.peerings.wait_reason(ns, "exec", "KubeconfigUnsafe")
    assert "--insecure-kubeconfig-exec" in cond["message"]

    config = yaml.safe_load(case.env.provider_kubeconfig())
    config["clusters"][0]["cluster"]["insecure-skip-tls-verify"] = True
    config["clusters"][0]["cluster"].pop("certificate-authority-data", None)
    case.peerings.put_kubeconfig_secret(ns, "insecure", yaml.safe_dump(config).encode())
    case.peerings.create(ns, "insecure", spec(remoteKubeconfigSecretRef={"name": "insecure"}))
    cond = case.peerings.wait_reason(ns, "insecure", "KubeconfigUnsafe")
    assert "--insecure-kubeconfig-tls" in cond["message"]

    everything = str(case.peerings.status(ns, "exec")) + str([e.message for e in case.peerings.events(ns, "exec")])
    assert token not in everything
    assert token not in case.env.operator.log()
    key_data = yaml.safe_load(case.env.provider_kubeconfig())["users"][0]["user"]["client-key-data"]
    assert key_data[:40] not in case.env.operator.log()


def test_unreachable_provider_then_force_delete(case: PeeringCase) -> None:
    ns = case.namespace
    config = yaml.safe_load(case.env.provider_kubeconfig())
    config["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:1"  # nothing listens on port 1
    case.peerings.put_kubeconfig_secret(ns, "unreachable", yaml.safe_dump(config).encode())
    case.peerings.create(ns, "gone", spec(remoteKubeconfigSecretRef={"name": "unreachable"}))
    cond = case.peerings.wait_reason(ns, "gone", "ProviderUnreachable")
    assert "127.0.0.1:1" in cond["message"]

    # A ready peering whose provider becomes unreachable keeps its finalizer until forced.
    case.peerings.create(ns, NAME, spec())
    case.peerings.wait_status(ns, NAME, "ready")
    case.peerings.put_kubeconfig_secret(ns, SECRET, yaml.safe_dump(config).encode())
    case.peerings.delete(ns, NAME)
    wait_for(
        "deletion to report the unreachable provider",
        lambda: (case.peerings.condition(ns, NAME, "Stalled") or {}).get("reason") == "ProviderUnreachable",
        timeout=60,
    )
    assert case.peerings.get(ns, NAME) is not None
    c_ns = tenant_ns(case.env.peerings.api, case.env.provider_id)
    case.peerings.patch(ns, NAME, {"metadata": {"annotations": {"peering.liqo-operator.io/force-delete": "true"}}})
    case.peerings.wait_gone(ns, NAME)
    # As liqoctl force unpeer: the ForeignCluster marked as Liqo reads it, and this cluster's tenant namespace
    # deleted with everything in it.
    fc = get(case.env.peerings.api, "core.liqo.io", "foreignclusters", None, case.env.provider_id)
    if fc is not None:
        notes = fc["metadata"].get("annotations") or {}
        assert notes.get("liqo.io/foreign-cluster-permanently-unreachable") == "true", notes
    wait_for(
        "the consumer's tenant namespace to be gone",
        lambda: not k8s.CoreV1Api(case.env.peerings.api).list_namespace(field_selector=f"metadata.name={c_ns}").items,
        timeout=60,
    )
    # The provider side was left alone (it was unreachable): clean it for the next test.
    p_ns = tenant_ns(case.env.provider_api, case.env.consumer_id)
    assert items(case.env.provider_api, "authentication.liqo.io", "tenants", p_ns)
    for plural, group in (
        ("tenants", "authentication.liqo.io"),
        ("gatewayservers", "networking.liqo.io"),
        ("configurations", "networking.liqo.io"),
        ("publickeies", "networking.liqo.io"),
    ):
        for obj in items(case.env.provider_api, group, plural, p_ns):
            custom(case.env.provider_api).delete_namespaced_custom_object(
                group, "v1beta1", p_ns, plural, obj["metadata"]["name"]
            )


def test_liqo_missing_on_the_provider(case: PeeringCase) -> None:
    case.env.lc.uninstall("provider")
    case.peerings.create(case.namespace, NAME, spec())
    cond = case.peerings.wait_reason(case.namespace, NAME, "LiqoNotInstalled", timeout=90)
    assert "provider" in cond["message"]


def test_second_peering_to_the_same_provider_is_refused(case: PeeringCase) -> None:
    ns = case.namespace
    case.peerings.create(ns, NAME, spec())
    case.peerings.wait_status(ns, NAME, "ready")
    case.peerings.create(ns, "again", spec())
    cond = case.peerings.wait_reason(ns, "again", "DuplicatePeering")
    assert f"{ns}/{NAME}" in cond["message"]
    assert case.peerings.status(ns, NAME)["peerStatus"] == "ready"


def _peering_user(case: PeeringCase) -> dict[str, list[tuple[str, list[str]]]]:
    """What minting made on the provider for this consumer, by kind: (name, bound users); CSRs included."""
    provider = Kube(case.env.provider_api)
    selector = f"{pu.USER_LABEL}={pu.user_name(case.env.consumer_id)}"
    return {
        res.plural: sorted((o["metadata"]["name"], pu.bound_users(o)) for o in provider.list(res, None, selector))
        for res in (k.ROLEBINDING, k.CLUSTERROLEBINDING, k.CLUSTERROLE, k.CSR)
    }


MINTING_TIMEOUT = 180.0  # a pass that mints also waits for the provider's signer
NOTHING_MINTED: dict[str, list[tuple[str, list[str]]]] = {
    "rolebindings": [],
    "clusterrolebindings": [],
    "clusterroles": [],
    "certificatesigningrequests": [],
}


def _secret_names(case: PeeringCase) -> set[str]:
    return {s["metadata"]["name"] for s in Kube(case.env.peerings.api).list(k.SECRET, case.namespace)}


def _minted_kubeconfig_allowed(case: PeeringCase, secret: str) -> bool:
    """Whether the provider grants the minted credential what it is for: its tenant namespace."""
    stored = Kube(case.env.peerings.api).get(k.SECRET, secret, case.namespace)
    assert stored is not None, secret
    config = yaml.safe_load(base64.b64decode(stored["data"][pu.KUBECONFIG_KEY]))
    api = k8s_config.new_client_from_config_dict(config)
    try:
        k8s.CoreV1Api(api).read_namespace(tenant_ns(case.env.provider_api, case.env.consumer_id))
    except ApiException as exc:
        if exc.status in (401, 403):
            return False
        raise
    finally:
        api.close()
    return True


def test_a_duplicate_with_minted_credentials_leaves_the_first_ones_identity(case: PeeringCase) -> None:
    """Two peerings to one provider, both minting: the second is refused before it mints, so the provider's
    bindings keep naming the first one's user, which goes on reconciling with its own certificate; once both
    are deleted, nothing either made is left."""
    env, ns = case.env, case.namespace
    case.peerings.create(ns, NAME, spec(credentials={"mint": True}))
    status = case.peerings.wait_status(ns, NAME, "ready", timeout=MINTING_TIMEOUT)
    user, secret = status["credentials"]["user"], status["credentials"]["secretName"]
    prefix = pu.user_name(env.consumer_id)
    first_only = {
        "rolebindings": [(f"{prefix}-liqo-ns-reader", [user]), (f"{prefix}-tenant-ns-writer", [user])],
        "clusterrolebindings": [(f"{prefix}-revoke", [user])],
        "clusterroles": [(f"{prefix}-revoke", [])],
        "certificatesigningrequests": [],  # deleted once issued
    }
    assert _peering_user(case) == first_only

    case.peerings.create(ns, "again", spec(credentials={"mint": True}))
    cond = case.peerings.wait_reason(ns, "again", "DuplicatePeering", timeout=MINTING_TIMEOUT)
    assert f"{ns}/{NAME}" in cond["message"]
    assert not (case.peerings.status(ns, "again").get("credentials") or {}).get("user")
    names = _secret_names(case)
    assert naming.minted_secret("again") not in names and secret in names
    assert _peering_user(case) == first_only

    # The first goes on with its own certificate: a spec change is reconciled.
    case.peerings.patch(ns, NAME, {"spec": {"timeout": "3m"}})
    wait_for(
        "the first peering to reconcile its spec change",
        lambda: (lambda s: s.get("observedGeneration") == 2 and s.get("peerStatus") == "ready")(
            case.peerings.status(ns, NAME)
        ),
        timeout=MINTING_TIMEOUT,
    )
    assert case.peerings.status(ns, NAME)["credentials"]["user"] == user
    assert _minted_kubeconfig_allowed(case, secret)

    case.peerings.delete(ns, "again")  # unpeering the duplicate revokes nothing of the first's
    case.peerings.wait_gone(ns, "again", timeout=MINTING_TIMEOUT)
    assert _peering_user(case) == first_only
    assert _minted_kubeconfig_allowed(case, secret)

    case.peerings.delete(ns, NAME)
    case.peerings.wait_gone(ns, NAME, timeout=MINTING_TIMEOUT)
    # The bindings go with the revoke ClusterRole, removed by the provider's garbage collector.
    wait_for("the minted user's objects to be gone", lambda: _peering_user(case) == NOTHING_MINTED, timeout=30)
    names = _secret_names(case)
    assert not names & {secret, naming.minted_secret("again")}, names


def test_admission_rejects_invalid_specs_naming_the_field(case: PeeringCase) -> None:
    # Every CEL rule of both CRDs, and some OpenAPI checks (tests/e2e/admission_cases.py).
    assert admission_failures(case.peerings.api, case.namespace) == []


def kubectl(case: PeeringCase, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    binary = str(tool_path("kubectl"))
    kubeconfig = str(case.env.lc["consumer"].kubeconfig)
    return subprocess.run([binary, "--kubeconfig", kubeconfig, *args], capture_output=True, text=True, timeout=timeout)


def test_kubectl_wait_get_and_describe_answer_is_it_up(case: PeeringCase) -> None:
    ns = case.namespace
    case.peerings.create(ns, NAME, spec())
    waited = kubectl(case, "wait", "--for=condition=Ready", f"liqopeering/{NAME}", "-n", ns, "--timeout=150s")
    assert waited.returncode == 0, waited.stderr
    assert case.peerings.status(ns, NAME)["peerStatus"] == "ready"
    table = kubectl(case, "get", "lp", "-n", ns, "-o", "wide")
    assert table.returncode == 0, table.stderr
    header, row = table.stdout.splitlines()[:2]
    assert header.split()[:6] == ["NAME", "REMOTE", "CLUSTER", "STATUS", "READY", "REASON"]
    assert row.split()[:5] == [NAME, case.env.provider_id, "ready", "True", "PeeringEstablished"]
    described = kubectl(case, "describe", "lp", "-n", ns, NAME).stdout
    assert "PeeringReady" in described
    assert re.search(r"Peer Status:\s+ready", described), described


def test_status_mirrors_foreign_cluster_changes(case: PeeringCase) -> None:
    """Liqo's ForeignCluster conditions reach the LiqoPeering, mapped to our conditions, and back again."""
    env, ns = case.env, case.namespace
    case.peerings.create(ns, NAME, spec())
    case.peerings.wait_status(ns, NAME, "ready")
    # Liqo's controllers on the consumer stop writing (and no pass begun before the pause is still writing).
    case.standin.set_faults("consumer", paused="true")
    fc_api = custom(env.peerings.api)
    fc: Any = fc_api.get_cluster_custom_object("core.liqo.io", "v1beta1", "foreignclusters", env.provider_id)
    broken = {
        "type": "NetworkConnectionStatus",
        "status": "Error",
        "reason": "ConnectionError",
        "message": "tunnel down (injected)",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    fc["status"]["modules"]["networking"]["conditions"] = [broken]
    fc_api.replace_cluster_custom_object_status("core.liqo.io", "v1beta1", "foreignclusters", env.provider_id, fc)

    def mirrored() -> dict[str, Any] | None:
        # Wait for the injected condition itself: the module can already be Unhealthy before the injection
        # (Liqo's aggregate lags the Connection, so a Ready peering may still mirror "Connection missing").
        status = case.peerings.status(ns, NAME)
        module = status.get("foreignCluster", {}).get("modules", {}).get("networking", {})
        return status if module.get("conditions") == [broken] else None

    status = wait_for("the mirror to show the broken networking module", mirrored, timeout=30)
    assert status["foreignCluster"]["modules"]["networking"]["health"] == "Unhealthy"
    # The stage itself is judged from the Connection, Liqo's earliest signal, which is still Connected:
    # NetworkReady stays True, and its message says that Liqo's aggregate disagrees.
    ready = next(c for c in status["conditions"] if c["type"] == "NetworkReady")
    assert (ready["status"], ready["reason"]) == ("True", "Established")
    assert "has not caught up yet" in ready["message"] and "tunnel down (injected)" in ready["message"]
    assert status["peerStatus"] == "ready"
    case.standin.set_faults("consumer", paused=None)
    case.peerings.wait_status(ns, NAME, "ready", timeout=90)
