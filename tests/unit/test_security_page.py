"""docs/security.md's table of rights matches the chart: every resource and verb the rendered ClusterRoles and
Roles grant, with any combination of the values that add rights, has a row, and every row names only rights
the chart grants. The chart aggregates its roles into no built-in role."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from chart import render

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "security.md"
HEADER = ["resource", "verbs", "scope", "why", "what confines it"]
TOKEN = re.compile(r"`([^`]+)`")

# Every value that adds or moves a right: the defaults (every namespace), minting, HA, and both again with
# watchNamespaces (Roles in each namespace, the tenant-access role).
RENDERS = (
    (),
    ("credentialsMinting=true", "ha.enabled=true", "clusterAPI.enabled=true"),
    ("watchNamespaces={team-a,team-b}", "credentialsMinting=true", "ha.enabled=true", "clusterAPI.enabled=true"),
    ("watchNamespaces={team-a}", "kubeconfigSecretProtection=false"),
)


def table() -> list[tuple[list[str], list[str]]]:
    """The rights table's rows as (resources, verbs), read from the backquoted words of their cells."""
    rows: list[tuple[list[str], list[str]]] = []
    header: list[str] | None = None
    for line in PAGE.read_text().splitlines():
        if not line.startswith("|"):
            if header is not None and rows:
                break
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if cells == HEADER:
            header = cells
        elif header is not None and not cells[0].startswith("---"):
            rows.append((TOKEN.findall(cells[0]), TOKEN.findall(cells[1])))
    assert header is not None and rows, f"no rights table ({' | '.join(HEADER)}) in {PAGE}"
    return rows


def granted() -> set[tuple[str, str]]:
    """(resource, verb) for every rule of every ClusterRole and Role the chart renders with any of RENDERS."""
    pairs = set()
    for sets in RENDERS:
        for doc in render(*sets):
            if doc["kind"] in ("ClusterRole", "Role"):
                for rule in doc.get("rules") or []:
                    pairs |= {(res, verb) for res in rule["resources"] for verb in rule["verbs"]}
    return pairs


def test_every_right_the_chart_grants_has_a_row() -> None:
    listed = {(res, verb) for resources, verbs in table() for res in resources for verb in verbs}
    missing = sorted(granted() - listed)
    assert not missing, f"docs/security.md's rights table lacks what the chart grants: {missing}"


def test_every_row_names_only_rights_the_chart_grants() -> None:
    pairs = granted()
    for resources, verbs in table():
        assert resources and verbs, (resources, verbs)
        extra = [(res, verb) for res in resources for verb in verbs if (res, verb) not in pairs]
        assert not extra, f"docs/security.md's rights table names rights the chart does not grant: {extra}"


def test_no_role_is_aggregated_into_the_built_in_ones() -> None:
    roles: list[dict[str, Any]] = [
        doc for sets in RENDERS for doc in render(*sets) if doc["kind"] in ("ClusterRole", "Role")
    ]
    assert roles
    for role in roles:
        labels = role["metadata"].get("labels") or {}
        aggregated = [k for k in labels if "aggregate-to-" in k]
        assert not aggregated and "aggregationRule" not in role, role["metadata"]
