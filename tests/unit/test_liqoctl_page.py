"""docs/reference/liqoctl.md, the liqoctl and Terraform table, names only fields that the CRD has, and has a row
for each option that liqoctl's peering commands take."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "reference" / "liqoctl.md"
CRD = REPO / "crds" / "peering.liqo-operator.io_liqopeerings.yaml"

# liqoctl v1.2.0's options for peering (cmd/liqoctl/cmd/peer.go, unpeer.go, root.go, and generate peering-user):
# the page must say for each what takes its place.
LIQOCTL_FLAGS = (
    "--remote-kubeconfig", "--remote-context", "--remote-user", "--remote-cluster",
    "--remote-insecure-skip-tls-verify", "--namespace", "--remote-namespace", "--timeout", "--skip-validation",
    "--networking-disabled", "--mtu", "--gw-server-service-location", "--gw-server-service-type",
    "--gw-server-service-port", "--gw-server-service-nodeport", "--gw-server-service-loadbalancerip",
    "--gw-client-address", "--gw-client-port", "--in-band", "--proxy-url", "--create-resource-slice",
    "--resource-slice-class", "--create-virtual-node", "--cpu", "--memory", "--pods", "--resource",
    "--global-labels", "--global-annotations", "--wait", "--delete-namespaces", "--consumer-cluster-id",
    "--tls-compatibility-mode",
)  # fmt: skip
FIELD = re.compile(r"`([a-z][A-Za-z]*(?:\.[a-z][A-Za-z]*)*)`")


def _rows() -> list[list[str]]:
    rows = []
    for line in PAGE.read_text().splitlines():
        if line.startswith("|") and not line.startswith("| ---"):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def _schema_has(schema: dict[str, Any], path: str) -> bool:
    node = schema
    for part in path.split("."):
        props = node.get("properties") or {}
        if part not in props:
            return False
        node = props[part]
    return True


def _root() -> dict[str, Any]:
    crd = yaml.safe_load(CRD.read_text())
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def test_every_field_named_exists_in_the_crd() -> None:
    root = _root()
    # Defaults are in parentheses: `liqo`, `true`.
    named = [f for row in _rows() for f in FIELD.findall(re.sub(r"\([^)]*\)", "", row[1])) if row[1] != "field"]
    assert len(named) > 30, named
    missing = [
        f
        for f in named
        if not (_schema_has(root["properties"]["spec"], f) or _schema_has(root, f))  # status.* is from the root
    ]
    assert not missing, f"docs/reference/liqoctl.md names fields the CRD does not have: {missing}"


@pytest.mark.parametrize("flag", LIQOCTL_FLAGS)
def test_every_liqoctl_option_has_a_row(flag: str) -> None:
    assert any(re.search(rf"`{re.escape(flag)}\b", row[0]) for row in _rows()), flag
