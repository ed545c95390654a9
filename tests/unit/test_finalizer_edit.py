"""A finalizer edit starts from the copy the caller just read: one request when that copy is current, and when
it is stale, the resourceVersion precondition answers 409 and the live object is read and written."""

from __future__ import annotations

from typing import Any, cast

from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.errors import ApiError
from liqo_peering.liqo import resources as r


class _Server(ClusterClient):
    """An API server holding one Secret at resourceVersion "2", which checks a patch's precondition."""

    def __init__(self) -> None:
        super().__init__(cast(Any, None), "consumer", "fake")
        self.calls: list[str] = []
        self.live = {"metadata": {"name": "s", "namespace": "ns", "resourceVersion": "2", "finalizers": ["a"]}}

    def _call(self, method: str, path: str, *, body: Any = None, **_: Any) -> Any:
        self.calls.append(method)
        if method == "GET":
            return self.live
        if body["metadata"]["resourceVersion"] != self.live["metadata"]["resourceVersion"]:
            raise ApiError("the object has been modified", status=409)
        self.live = {"metadata": {**self.live["metadata"], **body["metadata"], "resourceVersion": "3"}}
        return self.live


def adding(meta: dict[str, Any]) -> list[str]:
    return [*meta.get("finalizers", []), "ours"]


def copy_at(version: str, finalizers: list[str]) -> dict[str, Any]:
    return {"metadata": {"name": "s", "namespace": "ns", "resourceVersion": version, "finalizers": finalizers}}


def test_a_current_copy_costs_one_request() -> None:
    server = _Server()
    assert server.edit_finalizers(r.SECRET, "s", "ns", adding, known=copy_at("2", ["a"]))
    assert server.calls == ["PATCH"] and server.live["metadata"]["finalizers"] == ["a", "ours"]


def test_a_stale_copy_loses_no_finalizer() -> None:
    server = _Server()
    assert server.edit_finalizers(r.SECRET, "s", "ns", adding, known=copy_at("1", []))
    assert server.calls == ["PATCH", "GET", "PATCH"]
    assert server.live["metadata"]["finalizers"] == ["a", "ours"]  # another writer's "a" kept


def test_without_a_copy_the_live_object_is_read_first() -> None:
    server = _Server()
    assert server.edit_finalizers(r.SECRET, "s", "ns", adding)
    assert server.calls == ["GET", "PATCH"]
