"""LiqoPeeringSet's API: the CRD generated from api/peeringset.py, its CEL rules (evaluated with cel-python)
agreeing with the model's validators, its defaults agreeing with pydantic's, and its printer columns."""

from __future__ import annotations

from typing import Any

import celpy
import pytest
from pydantic import ValidationError

from hack import crdgen
from liqo_peering.api import model, peeringset
from unit.structural import apply_defaults, creation_rules
from unit.test_crd_generated import walk

CRD: dict[str, Any] = crdgen.render_set_crd()
VERSION: dict[str, Any] = CRD["spec"]["versions"][0]
ROOT: dict[str, Any] = VERSION["schema"]["openAPIV3Schema"]
SPEC: dict[str, Any] = ROOT["properties"]["spec"]
STATUS: dict[str, Any] = ROOT["properties"]["status"]
_CEL = celpy.Environment()


def cel_holds(schema: dict[str, Any], obj: Any) -> bool:
    """Every CEL rule of the schema tree holds on ``obj`` (objects and list items), as the API server checks."""
    for rule in creation_rules(schema):
        program = _CEL.program(_CEL.compile(rule["rule"]))
        try:
            if not bool(program.evaluate({"self": celpy.json_to_cel(obj)})):
                return False
        except celpy.CELEvalError:
            return False
    if isinstance(obj, dict):
        props = schema.get("properties") or {}
        return all(cel_holds(props[k], v) for k, v in obj.items() if k in props)
    if isinstance(obj, list) and isinstance(schema.get("items"), dict):
        return all(cel_holds(schema["items"], item) for item in obj)
    return True


def model_accepts(spec: dict[str, Any]) -> bool:
    try:
        peeringset.parse_set_spec(spec)
    except ValidationError:
        return False
    return True


def test_names_and_scope() -> None:
    assert CRD["metadata"]["name"] == "liqopeeringsets.peering.liqo-operator.io" == crdgen.SET_CRD_NAME
    names = CRD["spec"]["names"]
    assert (names["kind"], names["plural"], names["shortNames"]) == ("LiqoPeeringSet", "liqopeeringsets", ["lps"])
    assert names["categories"] == ["liqo"] and CRD["spec"]["scope"] == "Namespaced"
    assert CRD["spec"]["group"] == model.GROUP and VERSION["name"] == model.VERSION
    assert VERSION["subresources"] == {"status": {}}


def test_printer_columns_point_at_status_fields() -> None:
    columns = {c["name"]: c for c in VERSION["additionalPrinterColumns"]}
    assert [columns[n]["jsonPath"] for n in ("Desired", "Ready", "Establishing", "Error")] == [
        ".status.desired",
        ".status.ready",
        ".status.establishing",
        ".status.error",
    ]
    assert columns["All Ready"]["jsonPath"] == '.status.conditions[?(@.type=="Ready")].status'
    for column in VERSION["additionalPrinterColumns"]:
        head = column["jsonPath"].split("[")[0].lstrip(".").split(".")
        node = ROOT
        for part in head if head[0] != "metadata" else []:
            assert part in node.get("properties", {}), column["name"]
            node = node["properties"][part]


def test_status_is_kstatus_shaped() -> None:
    assert STATUS["default"] == {"observedGeneration": 0}
    assert STATUS["properties"]["conditions"]["x-kubernetes-list-map-keys"] == ["type"]
    assert STATUS["properties"]["peerings"]["x-kubernetes-list-map-keys"] == ["name"]
    assert {"desired", "ready", "establishing", "waiting", "error"} <= set(STATUS["properties"])


def test_schema_is_structural() -> None:
    for path, node in walk(ROOT, ""):
        assert "$ref" not in node and "title" not in node, path
        assert node.get("additionalProperties") is not False, path
        if "properties" in node:
            assert node["type"] == "object", path


def test_every_spec_field_is_described_and_documented() -> None:
    doc = crdgen.render_set_doc()
    for path, node in walk(SPEC, "spec"):
        if path != "spec" and not path.endswith(".*"):
            assert path.endswith("[]") or node.get("description"), path
            assert path.endswith("[]") or f"| `{path}` |" in doc, path
    assert "| `spec.selector` | object | required |" in doc
    assert str(peeringset.NAME_RULE["message"]) in doc and str(peeringset.VALUES_RULE["message"]) in doc


def test_the_template_is_a_liqopeering_spec_without_the_secret_reference() -> None:
    lp = crdgen.render_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    template = SPEC["properties"]["template"]
    sources = {"remoteKubeconfigSecretRef", "remoteClusterProfileRef", "remoteCluster"}
    assert set(lp["properties"]) - set(template["properties"]) == sources
    for name, sub in template["properties"].items():
        assert sub == lp["properties"][name], name
    # The LiqoPeering's own rules are those of its provider source, which the template has not.
    source_rules = [model.PROVIDER_SOURCE_RULE, model.PROFILE_MINT_RULE, model.PROFILE_CONTEXT_RULE, model.CLOUD_RULE]
    assert template["x-kubernetes-validations"] + source_rules == lp["x-kubernetes-validations"]


SELECTOR = {"matchLabels": {"fleet": "edge"}}


@pytest.mark.parametrize(
    "manifest",
    [
        {"selector": SELECTOR},
        {"selector": SELECTOR, "template": {"offloading": {"resources": {"cpu": 2}}}, "maxConcurrent": 2},
        {"selector": {"matchExpressions": [{"key": "fleet", "operator": "Exists"}]}, "deletionPolicy": "Orphan"},
    ],
)
def test_crd_defaults_equal_pydantic_defaults(manifest: dict[str, Any]) -> None:
    stored = apply_defaults(SPEC, manifest)
    assert peeringset.parse_set_spec(stored) == peeringset.parse_set_spec(manifest)
    assert stored["deletionPolicy"] == manifest.get("deletionPolicy", "Delete")
    assert stored["template"]["timeout"] == "5m"


@pytest.mark.parametrize(
    ("manifest", "accepted"),
    [
        ({"selector": SELECTOR}, True),
        ({"selector": {}}, False),
        ({"selector": {"matchLabels": {}, "matchExpressions": []}}, False),
        ({"selector": {"matchExpressions": [{"key": "a", "operator": "In", "values": ["x"]}]}}, True),
        ({"selector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}, False),
        ({"selector": {"matchExpressions": [{"key": "a", "operator": "NotIn", "values": []}]}}, False),
        ({"selector": {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}}, False),
        ({"selector": {"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}}, True),
        (
            {"selector": SELECTOR, "template": {"networking": {"enabled": False}, "authentication": {"inBand": True}}},
            False,
        ),
        ({"selector": SELECTOR, "template": {"offloading": {"createResourceSlice": False}}}, False),
        ({"selector": SELECTOR, "maxConcurrent": 0}, False),
    ],
)
def test_cel_rules_and_the_model_agree(manifest: dict[str, Any], accepted: bool) -> None:
    stored = apply_defaults(SPEC, manifest)
    minimum_ok = manifest.get("maxConcurrent", 1) >= SPEC["properties"]["maxConcurrent"]["minimum"]
    assert (cel_holds(SPEC, stored) and minimum_ok) is accepted
    assert model_accepts(manifest) is accepted


@pytest.mark.parametrize(("length", "accepted"), [(63, True), (64, False)])
def test_the_name_is_a_label_value(length: int, accepted: bool) -> None:
    obj = {"metadata": {"name": "a" * length}, "spec": {"selector": SELECTOR}}
    assert cel_holds({"x-kubernetes-validations": ROOT["x-kubernetes-validations"]}, obj) is accepted
