"""What exists on a cluster, counted by kind: for "nothing missing, duplicated or left over" checks."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, cast

from kubernetes import client as k8s

Ignore = Callable[[dict[str, Any]], bool]  # objects not to count


def listed(call: Callable[..., Any], *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
    """A list call's items as plain JSON: the client's models for CRDs (Liqo's schemas are large) and
    Secrets cost seconds of CPU per count, and counts are taken many times a test."""
    resp = call(*args, _preload_content=False, **kwargs)
    return cast(list[dict[str, Any]], json.loads(resp.data)["items"])


def liqo_kinds(api: k8s.ApiClient) -> list[tuple[str, str, str]]:
    """(group, storage version, plural) of every Liqo kind installed on the cluster (found through its CRDs)."""
    kinds = []
    for crd in listed(k8s.ApiextensionsV1Api(api).list_custom_resource_definition):
        spec = crd["spec"]
        if spec["group"].endswith("liqo.io"):
            version = next(v["name"] for v in spec["versions"] if v["storage"])
            kinds.append((spec["group"], version, spec["names"]["plural"]))
    return kinds


def liqo_items(api: k8s.ApiClient, ignore: Ignore | None = None) -> dict[str, list[dict[str, Any]]]:
    """Objects of every Liqo kind on the cluster (found through its CRDs), by plural.group; kinds with
    none are left out."""
    custom = k8s.CustomObjectsApi(api)
    found: dict[str, list[dict[str, Any]]] = {}
    for group, version, plural in liqo_kinds(api):
        items = listed(custom.list_cluster_custom_object, group, version, plural)
        kept = [item for item in items if ignore is None or not ignore(item)]
        if kept:
            found[f"{plural}.{group}"] = kept
    return found


def liqo_objects(api: k8s.ApiClient, ignore: Ignore | None = None) -> dict[str, int]:
    """How many objects of every Liqo kind there are, by plural.group; kinds with none are left out."""
    return {kind: len(objs) for kind, objs in liqo_items(api, ignore).items()}


def liqo_names(api: k8s.ApiClient, ignore: Ignore | None = None) -> dict[str, list[str]]:
    """namespace/name of the objects of every Liqo kind, by plural.group; kinds with none are left out."""
    return {
        kind: sorted(f"{o['metadata'].get('namespace') or ''}/{o['metadata']['name']}" for o in objs)
        for kind, objs in liqo_items(api, ignore).items()
    }


def counts(apis: dict[str, k8s.ApiClient], ignore: Ignore | None = None) -> dict[str, dict[str, int]]:
    """Liqo's objects, Secrets and namespaces on each cluster (side -> client). Namespaces being deleted,
    and their Secrets, are left out: an earlier test's namespace going away is not this test's doing.
    ``ignore``: Liqo objects not to count."""
    out = {}
    for side, api in apis.items():
        core = k8s.CoreV1Api(api)
        namespaces = listed(core.list_namespace)
        going = {n["metadata"]["name"] for n in namespaces if n["metadata"].get("deletionTimestamp")}
        secrets = [s for s in listed(core.list_secret_for_all_namespaces) if s["metadata"]["namespace"] not in going]
        out[side] = {**liqo_objects(api, ignore), "secrets": len(secrets), "namespaces": len(namespaces) - len(going)}
    return out


def labelled(api: k8s.ApiClient, selector: str) -> dict[str, dict[str, Any]]:
    """Every object on the cluster matching a label selector, of Liqo's kinds and of the built-in kinds a
    peering's objects can be of (Namespaces, Secrets, RBAC, CSRs), as "plural/namespace/name" -> its metadata."""
    core, rbac = k8s.CoreV1Api(api), k8s.RbacAuthorizationV1Api(api)
    certificates = k8s.CertificatesV1Api(api)
    listings: dict[str, Callable[..., Any]] = {
        "namespaces": core.list_namespace,
        "secrets": core.list_secret_for_all_namespaces,
        "rolebindings": rbac.list_role_binding_for_all_namespaces,
        "clusterroles": rbac.list_cluster_role,
        "clusterrolebindings": rbac.list_cluster_role_binding,
        "certificatesigningrequests": certificates.list_certificate_signing_request,
    }
    found: dict[str, dict[str, Any]] = {}

    def add(plural: str, items: list[dict[str, Any]]) -> None:
        for item in items:
            meta = item["metadata"]
            found[f"{plural}/{meta.get('namespace') or ''}/{meta['name']}"] = meta

    for plural, listing in listings.items():
        add(plural, listed(listing, label_selector=selector))
    custom = k8s.CustomObjectsApi(api)
    for group, version, plural in liqo_kinds(api):
        add(plural, listed(custom.list_cluster_custom_object, group, version, plural, label_selector=selector))
    return found


def metadata_off(
    objects: dict[str, dict[str, Any]],
    labels: dict[str, str],
    annotations: dict[str, str],
    dropped: tuple[str, ...] = (),
) -> dict[str, list[str]]:
    """Per object (labelled's metadata), the labels and annotations it lacks or has wrong, and the ``dropped``
    keys it still carries; objects with nothing off are left out."""
    off: dict[str, list[str]] = {}
    for key, meta in objects.items():
        have = {**(meta.get("labels") or {}), **(meta.get("annotations") or {})}
        wrong = [f"{k}={have.get(k)!r}" for k, v in {**labels, **annotations}.items() if have.get(k) != v]
        wrong += [f"{k} still there" for k in dropped if k in have]
        if wrong:
            off[key] = wrong
    return off
