"""Test doubles shared by the unit tests. Nothing here talks to a real API server.

``FakeClusterClient`` is an in-memory stand-in for ``liqo_peering.clients.cluster.ClusterClient``:
the same methods (get, find, apply, create_if_absent, merge_patch, delete, create), backed by a dict
keyed by (plural, namespace, name). Tests play Liqo's part by editing the stored objects between
engine passes (``obj``/``add``/``put``) and assert on the store and on the write log.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from typing import Any

from liqo_peering.clients.cluster import ClusterClient, selector_matches
from liqo_peering.errors import ApiError
from liqo_peering.liqo import resources as r
from liqo_peering.liqo.stored import canonical_quantity, is_empty

Key = tuple[str, str | None, str]  # (plural, namespace, name)

# Top-level fields the API server manages itself: never replaced by an apply.
_SERVER_OWNED = ("apiVersion", "kind", "metadata", "status")


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: dicts merge recursively, None deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge_patch(result.get(key), value)
    return result


def _apply_merge(live: Any, sent: Any) -> Any:
    """Server-side apply, simplified: maps merge recursively, anything else we send replaces."""
    if isinstance(live, dict) and isinstance(sent, dict):
        merged = dict(live)
        for key, value in sent.items():
            merged[key] = _apply_merge(live.get(key), value)
        return merged
    return copy.deepcopy(sent)


def _go_typed(obj: Any, key: str = "") -> Any:
    """An object as a Go typed Update writes it: no empty values, canonical quantities."""
    if isinstance(obj, dict):
        quantities = key in ("resources", "hard")
        out = {}
        for k, v in obj.items():
            v = canonical_quantity(v) if quantities and isinstance(v, str | int) else _go_typed(v, k)
            if not is_empty(v):
                out[k] = v
        return out
    if isinstance(obj, list):
        return [_go_typed(v) for v in obj]
    return obj


def _content(obj: dict[str, Any]) -> dict[str, Any]:
    """What counts as the object's spec for metadata.generation (everything but metadata and status)."""
    return {k: v for k, v in obj.items() if k not in _SERVER_OWNED}


class FakeClusterClient(ClusterClient):
    """In-memory fake of ClusterClient (no ApiClient, no HTTP).

    - ``apply`` behaves like server-side apply by the operator's field manager: maps merge into the
      live ones at any depth (other managers' fields stay), lists and scalars we send replace theirs,
      and what we send is stored as sent, empty maps included; ``status`` is kept.
    - ``typed_update`` plays a Liqo controller writing an object back through its Go struct: empty
      maps, lists and strings vanish (omitempty) and quantities take Go's canonical form. Together
      with ``apply`` it shows a write war: an operator that sends what Liqo drops writes every pass.
    - Every write bumps ``resourceVersion`` only on a real change, and ``metadata.generation`` only
      when the content (not metadata or status) changed.
    - Objects with ``metadata.finalizers`` are only marked deleting (deletionTimestamp), like the API
      server does, until ``finish_deletions`` drops them, so "wait until gone" can be exercised.
    - Resource types listed in ``not_served`` (plurals) behave like a missing CRD: reads and writes
      raise ``LiqoNotInstalled`` as the real client does; deletes count them as gone.
    - ``writes`` logs every call that changed the store as (verb, key); ``created`` and ``deleted``
      log creations and delete calls; ``reads`` every ``get``.
    - ``cached_kinds`` (plurals): the kinds an informer serves reads of (``cached``); none by default.
    """

    def __init__(self, side: str, *, not_served: set[str] | None = None) -> None:  # no ApiClient: no super()
        self.side = side
        self.describe = f"fake {side}"
        self.store: dict[Key, dict[str, Any]] = {}
        self.not_served: set[str] = set(not_served or ())
        self.writes: list[tuple[str, Key]] = []
        self.created: list[Key] = []
        self.deleted: list[Key] = []
        self.deleted_with_dependents: list[Key] = []
        self.reads: list[Key] = []
        self.cached_kinds: set[str] = set()
        self._version = 0
        # What read_path answers (None: 404): a Kubernetes 1.35 API server with Liqo v1.2's API groups.
        self.paths: dict[str, Any] = {
            "/version": {"major": "1", "minor": "35", "gitVersion": "v1.35.0"},
            "/apis/authentication.liqo.io": {"kind": "APIGroup", "name": "authentication.liqo.io"},
            "/openapi/v3/apis/core.liqo.io/v1beta1": {
                "components": {
                    "schemas": {
                        "io.liqo.core.v1beta1.ForeignCluster": {
                            "properties": {"status": {"properties": {"observedGeneration": {"type": "integer"}}}}
                        }
                    }
                }
            },
        }
        self.path_reads: list[str] = []

    # -- test helpers: playing the API server's and Liqo's part ---------------------------------
    def put(self, res: r.Resource, name: str, namespace: str | None, **meta: Any) -> None:
        """Store a bare object (metadata only), bypassing the write log."""
        obj: dict[str, Any] = {"apiVersion": res.api_version, "kind": res.kind, "metadata": {"name": name, **meta}}
        if namespace:
            obj["metadata"]["namespace"] = namespace
        self.store[(res.plural, namespace, name)] = obj

    def add(self, res: r.Resource, body: dict[str, Any]) -> dict[str, Any]:
        """Store a whole object (status included) as if someone else created it; bypasses the write log."""
        obj = copy.deepcopy(body)
        obj.setdefault("apiVersion", res.api_version)
        obj.setdefault("kind", res.kind)
        obj["metadata"].setdefault("generation", 1)
        obj["metadata"]["resourceVersion"] = self._next_version()
        self.store[self._key(res, obj)] = obj
        return obj

    def obj(self, res: r.Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        """The live stored object (not a copy): edit it to play Liqo's part. KeyError when absent."""
        return self.store[(res.plural, namespace, name)]

    def objects(self, res: r.Resource) -> list[dict[str, Any]]:
        return [o for (plural, _, _), o in self.store.items() if plural == res.plural]

    def finish_deletions(self) -> None:
        for key in [k for k, o in self.store.items() if o["metadata"].get("deletionTimestamp")]:
            del self.store[key]

    def kinds(self) -> set[str]:
        return {obj["kind"] for obj in self.store.values()}

    # -- plumbing -------------------------------------------------------------------------------
    def _next_version(self) -> str:
        self._version += 1
        return str(self._version)

    @staticmethod
    def _key(res: r.Resource, body: dict[str, Any]) -> Key:
        meta = body["metadata"]
        return (res.plural, meta.get("namespace") if res.namespaced else None, meta["name"])

    def _check_served(self, res: r.Resource) -> None:
        if res.plural in self.not_served:
            raise self._not_installed(res)

    def _store_new(self, key: Key, body: dict[str, Any], verb: str) -> dict[str, Any]:
        obj = copy.deepcopy(body)
        obj["metadata"]["generation"] = 1
        obj["metadata"]["resourceVersion"] = self._next_version()
        obj.pop("status", None)  # the API server ignores status on create (status subresource)
        self.store[key] = obj
        self.created.append(key)
        self.writes.append((verb, key))
        return copy.deepcopy(obj)

    def _replace(self, key: Key, old: dict[str, Any], new: dict[str, Any], verb: str) -> dict[str, Any]:
        wanted = (new.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and wanted != old["metadata"].get("resourceVersion"):
            raise ApiError("the object has been modified", status=409)  # a precondition, as the API server
        if new == old:
            return copy.deepcopy(old)
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            del self.store[key]  # its last finalizer gone: the API server deletes it
            self.writes.append((verb, key))
            return copy.deepcopy(new)
        if _content(new) != _content(old):
            new["metadata"]["generation"] = int(old["metadata"].get("generation") or 1) + 1
        new["metadata"]["resourceVersion"] = self._next_version()
        self.store[key] = new
        self.writes.append((verb, key))
        return copy.deepcopy(new)

    # -- the ClusterClient API ------------------------------------------------------------------
    def close(self) -> None:
        """No connections to release."""

    def read_path(self, path: str) -> Any | None:
        self.path_reads.append(path)
        return copy.deepcopy(self.paths.get(path))

    def get(
        self, res: r.Resource, name: str, namespace: str | None = None, carries: str | None = None
    ) -> dict[str, Any] | None:
        self._check_served(res)
        key = (res.plural, namespace if res.namespaced else None, name)
        self.reads.append(key)
        obj = self.store.get(key)
        return copy.deepcopy(obj) if obj is not None else None

    def read(self, res: r.Resource, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        return self.get(res, name, namespace)  # no cache here: what get returns is the store's

    def cached(self, res: r.Resource, name: str, namespace: str | None = None) -> bool:
        return res.plural in self.cached_kinds

    def find(
        self, res: r.Resource, namespace: str | None = None, labels: str | None = None, fields: str | None = None
    ) -> list[dict[str, Any]]:
        self._check_served(res)
        names = {v for k, _, v in (t.partition("=") for t in (fields or "").split(",") if t) if k == "metadata.name"}
        if fields and (len(names) != 1 or "," in fields):
            raise NotImplementedError("FakeClusterClient.find: only a metadata.name field selector is supported")
        found = []
        for (plural, ns, name), obj in self.store.items():
            in_scope = plural == res.plural and (namespace is None or ns == namespace) and (not names or name in names)
            if in_scope and selector_matches(labels, obj["metadata"].get("labels") or {}):
                found.append(copy.deepcopy(obj))
        return found

    def apply(self, res: r.Resource, body: dict[str, Any]) -> dict[str, Any]:
        self._check_served(res)
        key = self._key(res, body)
        old = self.store.get(key)
        if old is None:
            return self._store_new(key, body, "apply")
        new = copy.deepcopy(old)
        for field in ("labels", "annotations"):
            if body["metadata"].get(field):
                new["metadata"][field] = {**(old["metadata"].get(field) or {}), **body["metadata"][field]}
        for field, value in body.items():
            if field not in _SERVER_OWNED:
                new[field] = _apply_merge(old.get(field), value)
        return self._replace(key, old, new, "apply")

    def typed_update(self, res: r.Resource, name: str, namespace: str | None = None) -> bool:
        """Liqo writes the stored object back through its Go struct; True when that changed it."""
        key = (res.plural, namespace if res.namespaced else None, name)
        old = self.store[key]
        new = {k: (v if k in _SERVER_OWNED else _go_typed(v, k)) for k, v in old.items()}
        before = len(self.writes)
        self._replace(key, old, new, "liqo-update")
        return len(self.writes) > before

    def create_if_absent(self, res: r.Resource, body: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        found = self.get(res, body["metadata"]["name"], body["metadata"].get("namespace"))
        if found is not None:
            return found, False
        return self._store_new(self._key(res, body), body, "create"), True

    def create(self, res: r.Resource, body: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        self._check_served(res)
        body = copy.deepcopy(body)
        if namespace and res.namespaced:
            body["metadata"]["namespace"] = namespace
        key = self._key(res, body)
        if key in self.store:
            raise ApiError("already exists", status=409)
        return self._store_new(key, body, "create")

    def replace(self, res: r.Resource, body: dict[str, Any]) -> dict[str, Any]:
        self._check_served(res)
        key = self._key(res, body)
        old = self.store.get(key)
        if old is None:
            raise ApiError("not found", status=404)
        new = copy.deepcopy(body)
        new["metadata"].setdefault("resourceVersion", old["metadata"].get("resourceVersion"))
        for field in ("generation", "uid", "creationTimestamp", "deletionTimestamp"):
            if field in old["metadata"]:
                new["metadata"][field] = old["metadata"][field]
        if "status" in old:
            new["status"] = old["status"]  # the status subresource: a PUT of the object keeps it
        return self._replace(key, old, new, "replace")

    def merge_patch(
        self, res: r.Resource, name: str, namespace: str | None, patch: dict[str, Any], subresource: str | None = None
    ) -> dict[str, Any] | None:
        if res.plural in self.not_served:
            return None  # the real client maps every 404 to None
        key = (res.plural, namespace if res.namespaced else None, name)
        old = self.store.get(key)
        if old is None:
            return None
        if subresource == "status":
            patch = {"status": patch.get("status")} if "status" in patch else {}
        return self._replace(key, old, _merge_patch(old, patch), "merge_patch")

    def edit_finalizers(
        self,
        res: r.Resource,
        name: str,
        namespace: str | None,
        edit: Callable[[dict[str, Any]], list[str] | None],
        known: dict[str, Any] | None = None,
    ) -> bool:
        key = (res.plural, namespace if res.namespaced else None, name)
        old = self.store.get(key)
        if old is None:
            return False
        finalizers = edit(copy.deepcopy(old["metadata"]))
        if finalizers is None:
            return True
        if not finalizers and old["metadata"].get("deletionTimestamp"):
            del self.store[key]  # the last finalizer of an object being deleted: it goes
            self.writes.append(("finalizers", key))
            return True
        new = copy.deepcopy(old)
        new["metadata"]["finalizers"] = finalizers
        self._replace(key, old, new, "finalizers")
        return True

    def delete(
        self, res: r.Resource, name: str, namespace: str | None = None, *, with_dependents: bool = False
    ) -> dict[str, Any] | None:
        key = (res.plural, namespace if res.namespaced else None, name)
        self.deleted.append(key)
        if with_dependents:
            self.deleted_with_dependents.append(key)
        obj = self.store.get(key)
        if obj is not None:
            if obj["metadata"].get("finalizers"):
                if not obj["metadata"].get("deletionTimestamp"):
                    obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
                    self.writes.append(("delete", key))
                return copy.deepcopy(obj)
            del self.store[key]
            self.writes.append(("delete", key))
        return None


class Hub:
    """A watch hub that only keeps the routes each object was given."""

    def __init__(self) -> None:
        self.routes: dict[Any, list[Any]] = {}

    def set_routes(self, key: Any, routes: list[Any]) -> None:
        self.routes[key] = routes

    def drop(self, key: Any) -> None:
        self.routes.pop(key, None)


class Stopped:
    """kopf's daemon stop flag: falsy until set, and awaitable."""

    def __init__(self) -> None:
        self.event = asyncio.Event()

    def __bool__(self) -> bool:
        return self.event.is_set()

    async def wait(self) -> None:
        await self.event.wait()


class EventsClient:
    """What EventRecorder needs of a client: ``create``, each Event kept in ``events``."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def create(self, res: r.Resource, body: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        self.events.append(body)
        return body
