"""tests/faultpoints.py, the harness's wrapper: each of ClusterClient's calls is recorded when asked, and an armed
call raises once, before the call itself; the product's ClusterClient has no fault hook of its own."""

from __future__ import annotations

import functools
import inspect
from pathlib import Path
from typing import Any

import pytest

import faultpoints
from liqo_peering.clients import cluster
from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.liqo import resources as r


def test_the_product_has_no_fault_hook() -> None:
    source = inspect.getsource(cluster)
    assert "faults" not in source and "LIQO_PEERING_FAULTS" not in source


def test_every_call_named_is_a_method_of_the_client() -> None:
    for method in faultpoints.VERBS:
        assert callable(getattr(ClusterClient, method)), method
        assert "res" in inspect.signature(getattr(ClusterClient, method)).parameters, method


def test_records_calls_and_raises_once_at_the_armed_one(tmp_path: Path) -> None:
    (tmp_path / "record").touch()
    (tmp_path / "raise").write_text("provider apply tenants\n")
    faultpoints.at(tmp_path, "consumer", "get", "liqopeerings")
    with pytest.raises(RuntimeError, match="fault injected at provider apply tenants"):
        faultpoints.at(tmp_path, "provider", "apply", "tenants")
    faultpoints.at(tmp_path, "provider", "apply", "tenants")  # once only
    assert (tmp_path / "raised").read_text() == "provider apply tenants\n" and not (tmp_path / "raise").exists()
    assert (tmp_path / "calls").read_text().splitlines() == [
        "consumer get liqopeerings",
        "provider apply tenants",
        "provider apply tenants",
    ]


def test_several_armed_calls_each_raise_once(tmp_path: Path) -> None:
    (tmp_path / "raise").write_text("consumer get secrets\nprovider apply tenants\n")
    faultpoints.at(tmp_path, "consumer", "list", "namespaces")  # not armed
    with pytest.raises(RuntimeError, match="at provider apply tenants"):
        faultpoints.at(tmp_path, "provider", "apply", "tenants")
    assert (tmp_path / "raise").read_text() == "consumer get secrets\n"
    with pytest.raises(RuntimeError, match="at consumer get secrets"):
        faultpoints.at(tmp_path, "consumer", "get", "secrets")
    assert not (tmp_path / "raise").exists()


def test_installed_points_raise_before_the_call_and_name_subresources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[str] = []

    def stand_in(method: str) -> Any:
        """Records that the call itself ran; its signature is the real method's (functools.wraps)."""

        @functools.wraps(getattr(ClusterClient, method))
        def call(self: ClusterClient, *args: Any, **kwargs: Any) -> None:
            made.append(method)

        return call

    for method in faultpoints.VERBS:
        monkeypatch.setattr(ClusterClient, method, stand_in(method))
    faultpoints.install(tmp_path)
    client: Any = ClusterClient.__new__(ClusterClient)
    client.side = "consumer"
    (tmp_path / "record").touch()
    (tmp_path / "raise").write_text("consumer patch liqopeerings/status\n")
    client.get(r.SECRET, "k", "ns")
    with pytest.raises(RuntimeError, match="consumer patch liqopeerings/status"):
        client.merge_patch(r.LIQOPEERING, "p", "ns", {}, "status")
    client.merge_patch(r.LIQOPEERING, "p", "ns", {})
    assert made == ["get", "merge_patch"]  # the armed call raised before the call itself
    assert (tmp_path / "calls").read_text().splitlines() == [
        "consumer get secrets",
        "consumer patch liqopeerings/status",
        "consumer patch liqopeerings",
    ]
