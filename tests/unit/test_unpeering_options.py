"""Unpeering's options (liqo_peering.liqo.unpeering): which tenant namespaces go, and the ForeignCluster's mark
on force-delete, as liqoctl unpeer --delete-namespaces and liqoctl force unpeer do."""

from __future__ import annotations

import pytest

from liqo_peering.liqo import naming
from liqo_peering.liqo.unpeering import namespaces_to_delete, unreachable_patch

FOUND = {"consumer": "liqo-tenant-p", "provider": "liqo-tenant-c"}


def test_the_mark_is_liqos_own_key() -> None:
    assert naming.PERMANENTLY_UNREACHABLE == "liqo.io/foreign-cluster-permanently-unreachable"


def test_the_foreign_cluster_is_marked_once() -> None:
    fc = {"metadata": {"name": "p", "annotations": {"other": "x"}}}
    assert unreachable_patch(fc) == {
        "metadata": {"annotations": {"liqo.io/foreign-cluster-permanently-unreachable": "true"}}
    }
    marked = {"metadata": {"name": "p", "annotations": {naming.PERMANENTLY_UNREACHABLE: "true"}}}
    assert unreachable_patch(marked) is None
    assert unreachable_patch(None) is None  # no ForeignCluster: nothing waits on the provider
    assert unreachable_patch({"metadata": {"name": "p"}}) is not None


@pytest.mark.parametrize(
    ("delete", "force", "expected"),
    [
        (False, False, []),  # today's behaviour: they stay
        (True, False, [("consumer", "liqo-tenant-p"), ("provider", "liqo-tenant-c")]),
        (False, True, [("consumer", "liqo-tenant-p")]),  # force unpeer: this cluster's, the provider is gone
        (True, True, [("consumer", "liqo-tenant-p")]),
    ],
)
def test_which_tenant_namespaces_go(delete: bool, force: bool, expected: list[tuple[str, str]]) -> None:
    assert namespaces_to_delete(FOUND, delete_namespaces=delete, force=force, other_direction=False) == expected


def test_namespaces_stay_while_the_provider_consumes_this_cluster_through_another_peering() -> None:
    for delete, force in ((True, False), (False, True)):
        assert namespaces_to_delete(FOUND, delete_namespaces=delete, force=force, other_direction=True) == []


def test_a_namespace_not_found_is_skipped() -> None:
    found = {"consumer": "liqo-tenant-p", "provider": ""}
    assert namespaces_to_delete(found, delete_namespaces=True, force=False, other_direction=False) == [
        ("consumer", "liqo-tenant-p")
    ]
