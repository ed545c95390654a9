"""Specs the API server must refuse, one for each CEL rule of the two CRDs (and a few of their OpenAPI
checks), each naming the field at fault. test_peering sends them to the current Kubernetes,
test_kubernetes_floor to the oldest the chart supports: the rules hold on both.

Every refused request is a server-side dry run: nothing is stored, even a spec that should have been refused.
A transition rule (one that reads oldSelf) is checked only on an update, so its case stores the object it
updates first, with a kubeconfig Secret and a selector that name nothing (the operator does nothing with it),
and deletes it afterwards.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from hack.crdgen import CRD_FILE, SET_CRD_FILE
from liqo_peering.api import model, peeringset
from liqo_peering.api.model import GROUP, VERSION
from testenv.wait import wait_for

ROOT = Path(__file__).resolve().parents[2]
CRD_FILES = {model.KIND: ROOT / CRD_FILE, peeringset.KIND: ROOT / SET_CRD_FILE}
PLURALS = {model.KIND: model.PLURAL, peeringset.KIND: peeringset.PLURAL}
SECRET_REF = {"remoteKubeconfigSecretRef": {"name": "provider-kubeconfig"}}
SELECTOR = {"matchLabels": {"peer": "yes"}}
PROFILE_REF = {"remoteClusterProfileRef": {"name": "provider-profile"}}
CLOUD_REF = {
    "remoteCluster": {
        "provider": "aws",
        "cluster": "arn:aws:eks:eu-west-1:111122223333:cluster/provider",
        "address": "https://provider.example.com",
        "certificateAuthorityData": "LS0tLS1CRUdJTg==",
    }
}
GKE_REF = {
    "remoteCluster": {
        "provider": "gcp",
        "cluster": "projects/edge-project/locations/europe-west1-b/clusters/provider",
        "address": "https://203.0.113.10",
        "certificateAuthorityData": "LS0tLS1CRUdJTg==",
    }
}
SOURCE_RULE = str(model.PROVIDER_SOURCE_RULE["message"])
# What an update case's stored object points at: nothing, so that the operator has nothing to peer with.
NO_SECRET_REF = {"remoteKubeconfigSecretRef": {"name": "admission-no-such-secret"}}
NO_SELECTOR = {"matchLabels": {"admission-no-such-label": "none"}}
GATEWAY = "networking.gatewayServer"
OWN_KEYS = (
    "in Liqo's and the operator's own domains (liqo.io/, *.liqo.io/, *.liqo-operator.io/, app.kubernetes.io/managed-by)"
    " are set by Liqo and the operator: choose other keys"
)
# Where the API server says a rule on the whole object (no fieldPath) failed.
WHOLE_OBJECT = "<nil>"


@dataclass(frozen=True)
class Invalid:
    """A spec the API server refuses: `field` is where the refusal points (details.causes[].field); `rule`,
    the CEL rule's message, or None for an OpenAPI check (pattern, maximum, required)."""

    kind: str
    name: str
    spec: dict[str, Any]
    field: str
    rule: str | None = None
    old: dict[str, Any] | None = None  # an update of an object stored with this spec (transition rules)


def peering(**spec: Any) -> dict[str, Any]:
    return {**SECRET_REF, **spec}


def peering_set(template: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return {"selector": SELECTOR, "template": template or {}, **spec}


def rules(kind: str) -> Iterator[tuple[str, str]]:
    """(field, message) of every CEL rule in a CRD's schema; field is where a refusal points."""

    def walk(node: Any, path: str) -> Iterator[tuple[str, str]]:
        if not isinstance(node, dict):
            return
        for rule in node.get("x-kubernetes-validations", []):
            where = (path + rule.get("fieldPath", "")).lstrip(".")
            yield where or WHOLE_OBJECT, rule["message"]
        for name, child in (node.get("properties") or {}).items():
            yield from walk(child, f"{path}.{name}")
        yield from walk(node.get("items"), f"{path}[0]")

    crd = yaml.safe_load(CRD_FILES[kind].read_text())
    yield from walk(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"], "")


def _cel_cases(kind: str, wrap: str) -> list[Invalid]:
    """The rules a LiqoPeering's spec and a LiqoPeeringSet's template share; `wrap` is the template's path."""
    prefix = f"spec.{wrap}." if wrap else "spec."

    def case(name: str, spec: dict[str, Any], field: str, rule: str) -> Invalid:
        body = peering_set(spec) if wrap else peering(**spec)
        return Invalid(kind, name, body, prefix + field, rule)

    def update(name: str, old: dict[str, Any], new: dict[str, Any], field: str, rule: str) -> Invalid:
        def body(spec: dict[str, Any]) -> dict[str, Any]:
            return {"selector": NO_SELECTOR, "template": spec} if wrap else {**NO_SECRET_REF, **spec}

        return Invalid(kind, name, body(new), prefix + field, rule, old=body(old))

    return [
        case(
            "nodeport",
            {"networking": {"gatewayServer": {"serviceType": "ClusterIP", "nodePort": 30000}}},
            f"{GATEWAY}.nodePort",
            "nodePort can only be set when serviceType is NodePort",
        ),
        case(
            "lbip",
            {"networking": {"gatewayServer": {"serviceType": "NodePort", "loadBalancerIP": "1.2.3.4"}}},
            f"{GATEWAY}.loadBalancerIP",
            "loadBalancerIP can only be set when serviceType is LoadBalancer",
        ),
        update(
            "location",
            {"networking": {"gatewayServer": {"location": "Provider"}}},
            {"networking": {"gatewayServer": {"location": "Consumer"}}},
            f"{GATEWAY}.location",
            "location cannot be changed once set: delete the peering and create it again with the other location",
        ),
        case(
            "inband",
            {"networking": {"enabled": False}, "authentication": {"inBand": True}},
            "authentication.inBand",
            "authentication.inBand needs networking.enabled: in-band traffic uses the tunnel",
        ),
        case(
            "proxyurl",
            {"authentication": {"proxyURL": "http://[::1"}},
            "authentication.proxyURL",
            "proxyURL must be a URL such as http://proxy.example:8118",
        ),
        case(
            "vnode",
            {"offloading": {"createResourceSlice": False, "createVirtualNode": True}},
            "offloading.createVirtualNode",
            "createVirtualNode needs createResourceSlice: virtual nodes come from ResourceSlices",
        ),
        case(
            "reverse-vnode",
            {"reverse": {"offloading": {"createResourceSlice": False, "createVirtualNode": True}}},
            "reverse.offloading.createVirtualNode",
            "createVirtualNode needs createResourceSlice: virtual nodes come from ResourceSlices",
        ),
        case(
            "slices-and-single",
            {"offloading": {"resources": {"cpu": 2}, "resourceSlices": [{"name": "a"}]}},
            "offloading.resourceSlices",
            "resourceSlices replaces createResourceSlice, resourceSliceClass, createVirtualNode and resources:"
            " set those in each slice instead",
        ),
        case(
            "reverse-slices-and-single",
            {"reverse": {"offloading": {"createVirtualNode": False, "resourceSlices": [{"name": "a"}]}}},
            "reverse.offloading.resourceSlices",
            "resourceSlices replaces createResourceSlice, resourceSliceClass, createVirtualNode and resources:"
            " set those in each slice instead",
        ),
        case(
            "slice-names",
            {"offloading": {"resourceSlices": [{"name": "a"}, {"name": "b"}, {"name": "a", "class": "gold"}]}},
            "offloading.resourceSlices",
            "resourceSlices must have unique names",
        ),
        case(
            "reverse-slice-names",
            {"reverse": {"offloading": {"resourceSlices": [{"name": "a"}, {"name": "a"}]}}},
            "reverse.offloading.resourceSlices",
            "resourceSlices must have unique names",
        ),
        case(
            "deletebootstrap",
            {"credentials": {"deleteBootstrapSecret": True}},
            "credentials.deleteBootstrapSecret",
            "deleteBootstrapSecret needs mint: without minted credentials the bootstrap Secret is the credential",
        ),
        case(
            "lifetime",
            {"credentials": {"mint": True, "certificateLifetime": "5m"}},
            "credentials.certificateLifetime",
            "certificateLifetime needs mint, and from 10m (the shortest certificate Kubernetes issues) to 87600h",
        ),
        case(
            "liqo-label",
            {"commonMetadata": {"labels": {"team": "a", "liqo.io/remote-cluster-id": "x"}}},
            "commonMetadata.labels",
            f"labels {OWN_KEYS}",
        ),
        case(
            "operator-annotation",
            {"commonMetadata": {"annotations": {"peering.liqo-operator.io/force-delete": "true"}}},
            "commonMetadata.annotations",
            f"annotations {OWN_KEYS}",
        ),
        case(
            "lifetime-no-mint",
            {"credentials": {"certificateLifetime": "1h"}},
            "credentials.certificateLifetime",
            "certificateLifetime needs mint, and from 10m (the shortest certificate Kubernetes issues) to 87600h",
        ),
    ]


INVALID: list[Invalid] = [
    *_cel_cases("LiqoPeering", ""),
    Invalid(
        "LiqoPeering",
        "port",
        peering(networking={"gatewayServer": {"port": 70000}}),
        "spec.networking.gatewayServer.port",
    ),
    Invalid("LiqoPeering", "duration", peering(timeout="five minutes"), "spec.timeout"),
    Invalid(
        "LiqoPeering", "quantity", peering(offloading={"resources": {"cpu": "lots"}}), "spec.offloading.resources.cpu"
    ),
    # The provider source: exactly one of the Secret and the ClusterProfile, and minting only with the Secret.
    Invalid("LiqoPeering", "secretref", {"timeout": "1m"}, "spec.remoteClusterProfileRef", SOURCE_RULE),
    Invalid("LiqoPeering", "both-sources", peering(**PROFILE_REF), "spec.remoteClusterProfileRef", SOURCE_RULE),
    Invalid(
        "LiqoPeering",
        "profile-mint",
        {**PROFILE_REF, "credentials": {"mint": True}},
        "spec.credentials.mint",
        str(model.PROFILE_MINT_RULE["message"]),
    ),
    Invalid("LiqoPeering", "cloud-and-secret", peering(**CLOUD_REF), "spec.remoteClusterProfileRef", SOURCE_RULE),
    Invalid(
        "LiqoPeering",
        "cloud-endpoint-twice",
        {**CLOUD_REF, "remoteCluster": {**CLOUD_REF["remoteCluster"], "secretRef": {"name": "edge-endpoint"}}},
        "spec.remoteCluster.address",
        str(model.CLOUD_ENDPOINT_RULE["message"]),
    ),
    Invalid(
        "LiqoPeering",
        "cloud-cluster-form",
        {**CLOUD_REF, "remoteCluster": {**CLOUD_REF["remoteCluster"], "cluster": "cluster/edge"}},
        "spec.remoteCluster.cluster",
        str(model.CLOUD_CLUSTER_RULE["message"]),
    ),
    Invalid(
        "LiqoPeering",
        "gke-cluster-form",
        {"remoteCluster": {**GKE_REF["remoteCluster"], "cluster": CLOUD_REF["remoteCluster"]["cluster"]}},
        "spec.remoteCluster.cluster",
        str(model.CLOUD_CLUSTER_RULE["message"]),
    ),
    Invalid(
        "LiqoPeering",
        "cloud-delete-bootstrap",
        {**CLOUD_REF, "credentials": {"mint": True, "deleteBootstrapSecret": True}},
        "spec.remoteCluster",
        str(model.CLOUD_RULE["message"]),
    ),
    Invalid(
        "LiqoPeering",
        "profile-context",
        {**PROFILE_REF, "remoteContext": "other"},
        "spec.remoteContext",
        str(model.PROFILE_CONTEXT_RULE["message"]),
    ),
    Invalid(
        "LiqoPeering",
        "slice-name",
        peering(offloading={"resourceSlices": [{"name": "Not_A_Node"}]}),
        "spec.offloading.resourceSlices[0].name",
    ),
    # Size bounds (tests/unit/test_crd_bounds.py checks every string, list and map has one).
    Invalid(
        "LiqoPeering",
        "long-quantity",
        peering(offloading={"resources": {"memory": "1" * 64 + "Mi"}}),
        "spec.offloading.resources.memory",
    ),
    Invalid(
        "LiqoPeering",
        "long-annotation",
        peering(commonMetadata={"annotations": {"owner": "x" * 4097}}),
        "spec.commonMetadata.annotations.owner",
    ),
    Invalid("LiqoPeering", "long-context", peering(remoteContext="c" * 254), "spec.remoteContext"),
    *_cel_cases("LiqoPeeringSet", "template"),
    Invalid(
        "LiqoPeeringSet",
        "many-values",
        {"selector": {"matchExpressions": [{"key": "peer", "operator": "In", "values": ["x"] * 65}]}},
        "spec.selector.matchExpressions[0].values",
    ),
    Invalid(
        "LiqoPeeringSet",
        "a" * 64,
        peering_set(),
        WHOLE_OBJECT,
        "a LiqoPeeringSet's name is at most 63 characters: its peerings carry it as a label value",
    ),
    Invalid(
        "LiqoPeeringSet",
        "profile-template",
        {"source": "ClusterProfile", "selector": SELECTOR, "template": {"credentials": {"mint": True}}},
        "spec.template",
        str(peeringset.PROFILE_TEMPLATE_RULE["message"]),
    ),
    Invalid(
        "LiqoPeeringSet",
        "template-api-server",
        {"selector": SELECTOR, "template": {"authentication": {"apiServer": {"address": "https://proxy.example"}}}},
        "spec.template.authentication.apiServer",
        str(peeringset.TEMPLATE_API_SERVER_RULE["message"]),
    ),
    Invalid(
        "LiqoPeeringSet",
        "empty-selector",
        {"selector": {}},
        "spec.selector.matchLabels",
        "selector must name at least one label: an empty selector would take every object of its kind in the namespace",
    ),
    Invalid(
        "LiqoPeeringSet",
        "in-without-values",
        {"selector": {"matchExpressions": [{"key": "peer", "operator": "In"}]}},
        "spec.selector.matchExpressions[0].values",
        "values must be non-empty with In and NotIn, and empty with Exists and DoesNotExist",
    ),
    Invalid(
        "LiqoPeeringSet",
        "exists-with-values",
        {"selector": {"matchExpressions": [{"key": "peer", "operator": "Exists", "values": ["x"]}]}},
        "spec.selector.matchExpressions[0].values",
        "values must be non-empty with In and NotIn, and empty with Exists and DoesNotExist",
    ),
]
# Accepted: what the refusals above differ from.
VALID = [
    Invalid(
        "LiqoPeering",
        "valid",
        peering(
            credentials={"mint": True, "certificateLifetime": "24h"},
            commonMetadata={"labels": {"team": "a", "example.io/liqo": "x"}, "annotations": {"owner": "b"}},
        ),
        "",
    ),
    Invalid(
        "LiqoPeering",
        "valid-slices",
        peering(
            offloading={
                "resourceSlices": [
                    # A quantity at its 64-character bound.
                    {"name": "a", "class": "gold", "resources": {"cpu": 1, "memory": "1" * 62 + "Mi"}},
                    {"name": "b"},
                ]
            }
        ),
        "",
    ),
    Invalid("LiqoPeering", "valid-profile", {**PROFILE_REF, "timeout": "2m"}, ""),
    Invalid("LiqoPeering", "valid-gke", {**GKE_REF, "timeout": "2m"}, ""),
    Invalid("LiqoPeeringSet", "valid", peering_set({"authentication": {"proxyURL": "http://proxy.example:8118"}}), ""),
]


def uncovered_rules() -> list[tuple[str, str, str]]:
    """(kind, field, message) of every CEL rule no case in INVALID trips."""
    covered = {(c.kind, c.field, c.rule) for c in INVALID if c.rule}
    return [(kind, f, m) for kind in CRD_FILES for f, m in rules(kind) if (kind, f, m) not in covered]


def _dry_run_create(api: k8s.ApiClient, namespace: str, case: Invalid) -> None:
    if case.old is not None:
        _dry_run_update(api, namespace, case, case.old)
        return
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": case.kind, "metadata": {"name": case.name}, "spec": case.spec}
    k8s.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURALS[case.kind], body, dry_run="All"
    )


def _dry_run_update(api: k8s.ApiClient, namespace: str, case: Invalid, old: dict[str, Any]) -> None:
    """Store the object with the old spec, then send the new one as a dry-run update; the object is deleted
    (and waited for: the operator may hold it with its finalizer for a moment) whatever the answer."""
    custom, plural = k8s.CustomObjectsApi(api), PLURALS[case.kind]
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": case.kind, "metadata": {"name": case.name}, "spec": old}
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, plural, body)
    try:
        # A merge patch of the spec: no resourceVersion, so the operator's own writes cannot make it conflict.
        custom.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            plural,
            case.name,
            {"spec": case.spec},
            dry_run="All",
            _content_type="application/merge-patch+json",
        )
    finally:
        custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, plural, case.name)

        def gone() -> bool:
            try:
                custom.get_namespaced_custom_object(GROUP, VERSION, namespace, plural, case.name)
            except ApiException as exc:
                if exc.status == 404:
                    return True
                raise
            return False

        wait_for(f"{case.kind} {namespace}/{case.name} to be deleted", gone, timeout=60)


def admission_failures(api: k8s.ApiClient, namespace: str) -> list[str]:
    """Send every case to the API server; what did not go as expected (empty when all did)."""
    failures = [f"CEL rule not tried: {kind} {field}: {message}" for kind, field, message in uncovered_rules()]
    for case in VALID:
        try:
            _dry_run_create(api, namespace, case)
        except ApiException as exc:
            failures.append(f"{case.kind} {case.spec} was refused: {exc.body}")
    for case in INVALID:
        try:
            _dry_run_create(api, namespace, case)
        except ApiException as exc:
            body = json.loads(exc.body or "{}")
            causes = (body.get("details") or {}).get("causes") or []
            matching = [
                c for c in causes if c.get("field", "") == case.field and (case.rule or "") in c.get("message", "")
            ]
            if exc.status != 422 or not matching:
                failures.append(f"{case.kind}/{case.name}: want 422 at {case.field!r} ({case.rule}); got {exc.body}")
        else:
            failures.append(f"{case.kind}/{case.name} was accepted: {case.spec}")
    return failures
