"""What exists on a cluster, counted by kind: for "nothing missing, duplicated or left over" checks."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, cast

from kubernetes import client as k8s

Ignore = Callable[[dict[str, Any]], bool]  # objects not to count
# The API server's metadata-only list (what `kubectl get` asks for as a table's source): names, labels and
# owners, without specs and statuses. Counting and naming need no more, and tests count while polling.
METADATA_ONLY = {"Accept": "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"}


def listed(call: Callable[..., Any], *args: Any, metadata_only: bool = False, **kwargs: Any) -> list[dict[str, Any]]:
    """A list call's items as plain JSON: the client's models for CRDs (Liqo's schemas are large) and
    Secrets cost seconds of CPU per count, and counts are taken many times a test. With metadata_only, each
    item is {"metadata": ...} alone."""
    if metadata_only:
        kwargs["_headers"] = METADATA_ONLY
    resp = call(*args, _preload_content=False, **kwargs)
    # An empty metadata-only list of custom objects has "items": null.
    return cast(list[dict[str, Any]], json.loads(resp.data)["items"] or [])


Kinds = list[tuple[str, str, str, str]]
# By API server and the CRDs' (name, resourceVersion): a count re-reads the CRDs' metadata only, and their
# schemas only when one of them changed (a test installing Liqo, or another version of it).
_kinds: dict[tuple[str, frozenset[tuple[str, str]]], Kinds] = {}


def liqo_kinds(api: k8s.ApiClient) -> Kinds:
    """(group, storage version, plural, kind) of every Liqo kind installed on the cluster (found through its
    CRDs)."""
    ext = k8s.ApiextensionsV1Api(api)
    crds = listed(ext.list_custom_resource_definition, metadata_only=True)
    key = (api.configuration.host, frozenset((c["metadata"]["name"], c["metadata"]["resourceVersion"]) for c in crds))
    if key not in _kinds:
        kinds = []
        for crd in listed(ext.list_custom_resource_definition):
            spec = crd["spec"]
            if spec["group"].endswith("liqo.io"):
                version = next(v["name"] for v in spec["versions"] if v["storage"])
                kinds.append((spec["group"], version, spec["names"]["plural"], spec["names"]["kind"]))
        _kinds[key] = kinds
    return _kinds[key]


def liqo_items(api: k8s.ApiClient, ignore: Ignore | None = None) -> dict[str, list[dict[str, Any]]]:
    """Objects of every Liqo kind on the cluster (found through its CRDs), by plural.group; kinds with
    none are left out."""
    return _liqo_items(api, ignore, metadata_only=False)


def _liqo_items(api: k8s.ApiClient, ignore: Ignore | None, metadata_only: bool) -> dict[str, list[dict[str, Any]]]:
    custom = k8s.CustomObjectsApi(api)
    found: dict[str, list[dict[str, Any]]] = {}
    for group, version, plural, kind in liqo_kinds(api):
        items = listed(custom.list_cluster_custom_object, group, version, plural, metadata_only=metadata_only)
        # A metadata-only item is a PartialObjectMetadata: its own kind, for `ignore`.
        items = [{**item, "kind": kind} for item in items] if metadata_only else items
        kept = [item for item in items if ignore is None or not ignore(item)]
        if kept:
            found[f"{plural}.{group}"] = kept
    return found


def liqo_objects(api: k8s.ApiClient, ignore: Ignore | None = None) -> dict[str, int]:
    """How many objects of every Liqo kind there are, by plural.group; kinds with none are left out. `ignore`
    sees an object's kind and metadata only."""
    return {kind: len(objs) for kind, objs in _liqo_items(api, ignore, metadata_only=True).items()}


def liqo_names(api: k8s.ApiClient, ignore: Ignore | None = None) -> dict[str, list[str]]:
    """namespace/name of the objects of every Liqo kind, by plural.group; kinds with none are left out.
    `ignore` sees an object's kind and metadata only."""
    return {
        kind: sorted(f"{o['metadata'].get('namespace') or ''}/{o['metadata']['name']}" for o in objs)
        for kind, objs in _liqo_items(api, ignore, metadata_only=True).items()
    }


def counts(apis: dict[str, k8s.ApiClient], ignore: Ignore | None = None) -> dict[str, dict[str, int]]:
    """Liqo's objects, Secrets and namespaces on each cluster (side -> client). Namespaces being deleted,
    and their Secrets, are left out: an earlier test's namespace going away is not this test's doing.
    ``ignore``: Liqo objects not to count."""
    out = {}
    for side, api in apis.items():
        core = k8s.CoreV1Api(api)
        namespaces = listed(core.list_namespace, metadata_only=True)
        going = {n["metadata"]["name"] for n in namespaces if n["metadata"].get("deletionTimestamp")}
        secrets = listed(core.list_secret_for_all_namespaces, metadata_only=True)
        secrets = [s for s in secrets if s["metadata"]["namespace"] not in going]
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
    for group, version, plural, _ in liqo_kinds(api):
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
