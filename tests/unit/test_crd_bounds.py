"""Every string, list and map a user writes in a spec is bounded: the generated CRDs give each string a
maxLength, each array a maxItems and each map a maxProperties, and the pydantic model (their one source)
refuses the same oversized values for input that bypassed admission."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from liqo_peering.api import model, peeringset
from unit.structural import walk

REPO = Path(__file__).resolve().parents[2]
CRDS = sorted((REPO / "crds").glob("*.yaml"))


def unbounded(schema: dict[str, Any], path: str) -> list[str]:
    found = []
    for where, node in walk(schema, path):
        # An int-or-string takes its string bounds on the node itself (crdgen lifts them from the branch).
        kind = "string" if node.get("x-kubernetes-int-or-string") else node.get("type")
        if kind == "string" and "maxLength" not in node and "enum" not in node:
            found.append(f"{where}: string without maxLength")
        elif kind == "array" and "maxItems" not in node:
            found.append(f"{where}: array without maxItems")
        elif kind == "object" and "additionalProperties" in node and "maxProperties" not in node:
            found.append(f"{where}: map without maxProperties")
        elif kind == "object" and "properties" not in node and "additionalProperties" not in node:
            found.append(f"{where}: free-form object")
    return found


def specs() -> Iterator[tuple[str, dict[str, Any]]]:
    for path in CRDS:
        crd = yaml.safe_load(path.read_text())
        for version in crd["spec"]["versions"]:
            # The spec is what users write; the status is the operator's own output, and metadata, apiVersion
            # and kind are bounded by the API server itself.
            yield f"{path.name}:{version['name']}", version["schema"]["openAPIV3Schema"]["properties"]["spec"]


def test_both_crds_are_checked() -> None:
    assert [p.name for p in CRDS] == [
        "peering.liqo-operator.io_liqopeerings.yaml",
        "peering.liqo-operator.io_liqopeeringsets.yaml",
    ]


@pytest.mark.parametrize(("name", "spec"), list(specs()), ids=[name for name, _ in specs()])
def test_every_string_list_and_map_of_a_spec_is_bounded(name: str, spec: dict[str, Any]) -> None:
    assert unbounded(spec, "spec") == []


def test_the_walk_finds_unbounded_nodes() -> None:
    schema = {
        "type": "object",
        "properties": {
            "s": {"type": "string"},
            "a": {"type": "array", "items": {"type": "string", "maxLength": 1}},
            "m": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 1}},
            "q": {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True},
            "e": {"type": "string", "enum": ["x"]},
        },
    }
    assert unbounded(schema, "spec") == [
        "spec.s: string without maxLength",
        "spec.a: array without maxItems",
        "spec.m: map without maxProperties",
        "spec.q: string without maxLength",
    ]


BASE: dict[str, Any] = {"remoteKubeconfigSecretRef": {"name": "k"}}


@pytest.mark.parametrize(
    "extra",
    [
        {"remoteKubeconfigSecretRef": {"name": "k", "key": "k" * (model.MAX_NAME_LENGTH + 1)}},
        {"remoteContext": "c" * (model.MAX_NAME_LENGTH + 1)},
        {"timeout": "1s" * 20},
        {"networking": {"gatewayClient": {"address": "a" * (model.MAX_NAME_LENGTH + 1)}}},
        {"networking": {"gatewayServer": {"loadBalancerIP": "1" * (model.MAX_NAME_LENGTH + 1)}}},
        {"authentication": {"proxyURL": "http://p/" + "x" * model.MAX_URL_LENGTH}},
        {"offloading": {"resources": {f"r{i}": 1 for i in range(model.MAX_RESOURCES + 1)}}},
        {"offloading": {"resources": {"memory": "1" * 64 + "Mi"}}},
        {"commonMetadata": {"annotations": {"a": "x" * (model.MAX_ANNOTATION_VALUE_LENGTH + 1)}}},
        {"credentials": {"mint": True, "certificateLifetime": "1h" * 20}},
    ],
)
def test_the_model_refuses_what_the_bounds_refuse(extra: dict[str, Any]) -> None:
    model.parse_spec(BASE)
    with pytest.raises(ValidationError):
        model.parse_spec({**BASE, **extra})


@pytest.mark.parametrize(
    "selector",
    [
        {"matchLabels": {f"k{i}": "v" for i in range(peeringset.MAX_SELECTOR_TERMS + 1)}},
        {"matchLabels": {"k": "v" * 64}},
        {"matchExpressions": [{"key": "k", "operator": "Exists"}] * (peeringset.MAX_SELECTOR_TERMS + 1)},
        {"matchExpressions": [{"key": "k", "operator": "In", "values": ["v"] * (peeringset.MAX_SELECTOR_VALUES + 1)}]},
    ],
)
def test_the_set_model_refuses_what_the_bounds_refuse(selector: dict[str, Any]) -> None:
    peeringset.LiqoPeeringSetSpec.model_validate({"selector": {"matchLabels": {"k": "v"}}})
    with pytest.raises(ValidationError):
        peeringset.LiqoPeeringSetSpec.model_validate({"selector": selector})
