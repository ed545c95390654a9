"""The committed CRD and API reference are generated from the model, and the CRD obeys Kubernetes' rules."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from hack import crdgen
from liqo_peering.api import model
from unit.structural import apply_defaults, walk

REPO = Path(__file__).resolve().parents[2]
CRD: dict[str, Any] = crdgen.render_crd()
VERSION: dict[str, Any] = CRD["spec"]["versions"][0]
ROOT: dict[str, Any] = VERSION["schema"]["openAPIV3Schema"]
SPEC: dict[str, Any] = ROOT["properties"]["spec"]
STATUS: dict[str, Any] = ROOT["properties"]["status"]
OUTPUTS: dict[Path, str] = crdgen.outputs()


# -- drift -----------------------------------------------------------------------------------


def test_outputs_are_the_crds_and_a_field_reference_per_kind() -> None:
    assert set(OUTPUTS) == {
        Path("crds/peering.liqo-operator.io_liqopeerings.yaml"),
        Path("crds/peering.liqo-operator.io_liqopeeringsets.yaml"),
        Path("docs/reference/liqopeering-fields.md"),
        Path("docs/reference/liqopeeringset-fields.md"),
    }


@pytest.mark.parametrize("rel", list(OUTPUTS), ids=str)
def test_committed_file_matches_the_model(rel: Path) -> None:
    committed = REPO / rel
    assert committed.exists(), f"{rel} is missing: run `make generate`"
    assert committed.read_text() == OUTPUTS[rel], f"{rel} is out of date with api/model.py: run `make generate`"


def test_committed_crd_parses_to_the_rendered_object() -> None:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    assert yaml.load((REPO / crdgen.CRD_FILE).read_text(), Loader=loader) == CRD


def test_check_mode_reports_drift_without_writing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "crds").mkdir()
    stale = tmp_path / crdgen.CRD_FILE
    stale.write_text("stale\n")
    assert crdgen.main(["--root", str(tmp_path), "--check"]) == 1
    assert stale.read_text() == "stale\n"
    assert not (tmp_path / crdgen.DOC_FILE).exists() and not (tmp_path / crdgen.SET_DOC_FILE).exists()
    err = capsys.readouterr().err
    assert "make generate" in err and str(crdgen.CRD_FILE) in err and str(crdgen.DOC_FILE) in err


# -- CRD facts -------------------------------------------------------------------------------


def test_names_scope_and_version() -> None:
    assert CRD["metadata"]["name"] == "liqopeerings.peering.liqo-operator.io"
    assert CRD["spec"]["group"] == "peering.liqo-operator.io"
    names = CRD["spec"]["names"]
    assert names["kind"] == "LiqoPeering"
    assert names["listKind"] == "LiqoPeeringList"
    assert names["plural"] == "liqopeerings"
    assert names["singular"] == "liqopeering"
    assert names["shortNames"] == ["lp"]
    assert names["categories"] == ["liqo"]
    assert CRD["spec"]["scope"] == "Namespaced"
    assert [v["name"] for v in CRD["spec"]["versions"]] == ["v1alpha1"]
    assert VERSION["served"] is True and VERSION["storage"] is True


def test_status_subresource() -> None:
    assert VERSION["subresources"] == {"status": {}}


def test_status_defaults_to_a_generation_not_yet_observed() -> None:
    """Served before the operator's first status write: kstatus reads a custom resource without a status as
    Current (Flux's `wait: true` was Ready at once, tests/e2e/test_flux.py), one whose observedGeneration
    lags metadata.generation as InProgress."""
    assert STATUS["default"] == {"observedGeneration": 0}
    assert STATUS["properties"]["observedGeneration"]["type"] == "integer"


def test_printer_columns() -> None:
    columns = {c["name"]: c for c in VERSION["additionalPrinterColumns"]}
    assert columns["Remote Cluster"]["jsonPath"] == ".status.remoteClusterID"
    assert columns["Status"]["jsonPath"] == ".status.peerStatus"
    assert columns["Ready"]["jsonPath"] == '.status.conditions[?(@.type=="Ready")].status'
    assert columns["Age"] == {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
    # Every column points at a field the schema has.
    for column in VERSION["additionalPrinterColumns"]:
        head = column["jsonPath"].split("[")[0].lstrip(".").split(".")
        if head[0] == "metadata":
            continue
        node = ROOT
        for part in head:
            assert part in node.get("properties", {}), f"printer column {column['name']} points at a missing field"
            node = node["properties"][part]


def test_spec_is_required() -> None:
    assert ROOT["required"] == ["spec"]
    # One of the two provider sources is (a CEL rule), listed first; neither has a default.
    assert "required" not in SPEC
    sources = ["remoteKubeconfigSecretRef", "remoteClusterProfileRef", "remoteCluster"]
    assert list(SPEC["properties"])[:3] == sources
    for source in sources:
        assert "default" not in SPEC["properties"][source]


def test_status_conditions_are_a_map_list_keyed_by_type() -> None:
    conditions = STATUS["properties"]["conditions"]
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    assert "type" in conditions["items"]["required"]


def test_mirrored_liqo_conditions_preserve_unknown_fields() -> None:
    mirror = STATUS["properties"]["foreignCluster"]["properties"]
    assert mirror["conditions"]["items"]["x-kubernetes-preserve-unknown-fields"] is True
    for module in ("networking", "authentication", "offloading"):
        items = mirror["modules"]["properties"][module]["properties"]["conditions"]["items"]
        assert items["x-kubernetes-preserve-unknown-fields"] is True


# -- structural schema -----------------------------------------------------------------------


@pytest.mark.parametrize("part", ["spec", "status"])
def test_schema_is_structural(part: str) -> None:
    for path, node in walk(ROOT["properties"][part], part):
        assert "$ref" not in node, path
        assert "$defs" not in node and "definitions" not in node, path
        assert "title" not in node, path
        assert node.get("additionalProperties") is not False, f"{path}: additionalProperties: false"
        if "properties" in node and "additionalProperties" in node:
            # the API server allows only `true` next to properties; it still prunes, so it needs preserve
            assert node["additionalProperties"] is True, path
            assert node.get("x-kubernetes-preserve-unknown-fields") is True, path
        assert "default" not in node or node["default"] is not None, f"{path}: default null"
        if "anyOf" in node:
            assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], path
            assert node.get("x-kubernetes-int-or-string") is True, path
            assert "type" not in node, path
        elif not node.get("x-kubernetes-preserve-unknown-fields"):
            assert node.get("type") in ("object", "array", "string", "integer", "number", "boolean"), path
        if "properties" in node:
            assert node["type"] == "object", path
        for key in ("oneOf", "allOf", "not", "const", "nullable"):
            assert key not in node, f"{path}: {key}"


def test_schema_has_no_ref_anywhere() -> None:
    assert "$ref" not in json.dumps(CRD)


def test_quantities_are_int_or_string_with_the_quantity_pattern() -> None:
    values = SPEC["properties"]["offloading"]["properties"]["resources"]["additionalProperties"]
    assert values["x-kubernetes-int-or-string"] is True
    assert values["pattern"] == model.QUANTITY_PATTERN


def test_every_spec_property_has_a_description() -> None:
    missing = [path for path, node in walk(SPEC, "spec") if path != "spec" and not path.endswith(".*")]
    missing = [path for path in missing if not dict(walk(SPEC, "spec"))[path].get("description")]
    assert missing == []


def drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: drop_none(v) for k, v in value.items() if v is not None}
    return value


def test_optional_spec_objects_default_to_their_nested_defaults() -> None:
    """The API server validates a default against CEL rules without defaulting inside it first, so an
    optional object's default spells out every nested default (a bare `{}` was rejected by the server)."""
    props = SPEC["properties"]
    pydantic_defaults = drop_none(
        model.parse_spec({"remoteKubeconfigSecretRef": {"name": "k"}}).model_dump(by_alias=True)
    )
    for name in ("networking", "authentication", "offloading"):
        assert props[name]["default"] == pydantic_defaults[name], name
    assert props["offloading"]["default"]["createVirtualNode"] is True
    assert props["networking"]["properties"]["gatewayServer"]["default"]["port"] == 51840
    assert props["networking"]["properties"]["gatewayClient"]["default"] == {}
    # The required secret ref must not be defaulted, and the objects inside status are not defaulted (status
    # itself is: test_status_defaults_to_a_generation_not_yet_observed).
    assert "default" not in props["remoteKubeconfigSecretRef"]
    assert all("default" not in node or node["type"] != "object" for path, node in walk(STATUS) if path)


# -- defaults: the API server and pydantic agree ---------------------------------------------


def drop_empty_maps(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: drop_empty_maps(v) for k, v in value.items() if v != {}}
    return value


@pytest.mark.parametrize(
    "manifest",
    [
        {"remoteKubeconfigSecretRef": {"name": "k"}},
        {"remoteKubeconfigSecretRef": {"name": "k"}, "networking": {"gatewayServer": {"serviceType": "NodePort"}}},
        {"remoteKubeconfigSecretRef": {"name": "k", "key": "value"}, "offloading": {"createVirtualNode": False}},
        {"remoteKubeconfigSecretRef": {"name": "k"}, "networking": {"enabled": False}, "authentication": {}},
    ],
)
def test_crd_defaults_equal_pydantic_defaults(manifest: dict[str, Any]) -> None:
    by_api_server = apply_defaults(SPEC, manifest)
    by_pydantic = model.parse_spec(manifest).model_dump(by_alias=True, exclude_none=True)
    assert drop_empty_maps(by_api_server) == drop_empty_maps(by_pydantic)
    # and what the API server stores reads back as the same spec
    assert model.parse_spec(by_api_server) == model.parse_spec(manifest)


def test_every_schema_default_is_a_pydantic_default() -> None:
    defaults = model.parse_spec({"remoteKubeconfigSecretRef": {"name": "k"}}).model_dump(by_alias=True)
    seen = 0
    for path, node in walk(SPEC, ""):
        if "default" not in node:
            continue
        value: Any = defaults
        if "[]." in path:  # a field of a list's items: the default of an item that sets only what it must
            value = model.ResourceSliceSpec(name="a").model_dump(by_alias=True)
            path = path.split("[].")[-1]
        for part in path.lstrip(".").split("."):
            value = value[part]
        if isinstance(node["default"], dict):
            assert drop_none(value) == node["default"], path
        else:
            assert value == node["default"], path
            seen += 1
    # key, timeout, 2 namespaces, skipValidation, allowLiqoVersionSkew, 2 net, 3 server, inBand, 3 offloading,
    # 3 credentials, bidirectional, 3 reverse offloading, deleteTenantNamespaces, 2 for each resourceSlices item
    # (both directions)
    assert seen == 27


# -- CEL rules -------------------------------------------------------------------------------


def cel_rules() -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    found: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    for path, node in walk(SPEC, "spec"):
        found.extend((path, node, rule) for rule in node.get("x-kubernetes-validations", []))
    return found


def test_every_cel_rule_has_a_message() -> None:
    rules = cel_rules()
    assert rules
    for path, _, rule in rules:
        assert rule.get("message", "").strip(), f"{path}: {rule['rule']}"
        assert set(rule) <= {"rule", "message", "messageExpression", "fieldPath", "reason"}, path


def test_cel_rules_sit_where_expected() -> None:
    placed = {(path, rule["fieldPath"]) for path, _, rule in cel_rules()}
    assert placed == {
        ("spec.networking.gatewayServer", ".nodePort"),
        ("spec.networking.gatewayServer", ".loadBalancerIP"),
        ("spec.networking.gatewayServer", ".location"),
        ("spec", ".authentication.inBand"),
        ("spec", ".remoteClusterProfileRef"),
        ("spec", ".remoteCluster"),
        ("spec.remoteCluster", ".cluster"),
        ("spec.remoteCluster", ".address"),
        ("spec", ".credentials.mint"),
        ("spec", ".remoteContext"),
        ("spec.offloading", ".createVirtualNode"),
        ("spec.reverse.offloading", ".createVirtualNode"),
        ("spec.offloading", ".resourceSlices"),
        ("spec.reverse.offloading", ".resourceSlices"),
        ("spec.authentication", ".proxyURL"),
        ("spec.credentials", ".deleteBootstrapSecret"),
        ("spec.credentials", ".certificateLifetime"),
        ("spec.commonMetadata", ".labels"),
        ("spec.commonMetadata", ".annotations"),
    }


def test_cel_rule_contents() -> None:
    rules = {(path, rule["fieldPath"]): rule["rule"] for path, _, rule in cel_rules()}
    assert "serviceType == 'NodePort'" in rules[("spec.networking.gatewayServer", ".nodePort")]
    assert "serviceType == 'LoadBalancer'" in rules[("spec.networking.gatewayServer", ".loadBalancerIP")]
    assert rules[("spec.networking.gatewayServer", ".location")] == "self.location == oldSelf.location"
    assert "self.networking.enabled" in rules[("spec", ".authentication.inBand")]
    assert "self.createResourceSlice" in rules[("spec.offloading", ".createVirtualNode")]
    both = [rule["rule"] for path, _, rule in cel_rules() if path == "spec.offloading"]
    assert any("exists_one(t, t.name == s.name)" in rule for rule in both)
    assert any("self.resourceSliceClass == 'default'" in rule for rule in both)
    assert "isURL(self.proxyURL)" in rules[("spec.authentication", ".proxyURL")]
    assert "self.mint" in rules[("spec.credentials", ".deleteBootstrapSecret")]
    assert "duration('10m')" in rules[("spec.credentials", ".certificateLifetime")]
    for field in ("labels", "annotations"):
        assert "liqo-operator" in rules[("spec.commonMetadata", f".{field}")]


def test_every_cel_rule_of_both_crds_has_an_admission_case() -> None:
    # The e2e tiers send each case to a real API server (test_peering, test_kubernetes_floor); a rule added
    # without one shows up here first.
    from e2e.admission_cases import uncovered_rules

    assert uncovered_rules() == []


def _refs(rule: str) -> list[str]:
    """The fields a rule reads (self.x.y), without the macros called on them (self.labels.all(...))."""
    macros = r"\.(all|exists|exists_one|map|filter|matches)$"
    return [re.sub(macros, "", ref) for ref in re.findall(r"self\.([A-Za-z0-9_.]+)", rule)]


def test_cel_rules_and_field_paths_name_existing_fields() -> None:
    def resolve(node: dict[str, Any], dotted: str) -> dict[str, Any] | None:
        for part in dotted.split("."):
            node = (node.get("properties") or {}).get(part)  # type: ignore[assignment]
            if node is None:
                return None
        return node

    for path, node, rule in cel_rules():
        assert resolve(node, rule["fieldPath"].lstrip(".")) is not None, f"{path}: fieldPath {rule['fieldPath']}"
        for ref in _refs(rule["rule"]):
            assert resolve(node, ref) is not None, f"{path}: rule mentions missing self.{ref}"


def test_fields_read_by_cel_without_has_are_always_defaulted() -> None:
    """A rule that reads self.x without has() fails on objects without x: x must have a default."""
    for path, node, rule in cel_rules():
        guarded = set(re.findall(r"has\(self\.([A-Za-z0-9_.]+)\)", rule["rule"]))
        for ref in _refs(rule["rule"]):
            if ref in guarded:
                continue
            target = node
            for part in ref.split("."):
                target = target["properties"][part]
                assert "default" in target or part in node.get("required", []), f"{path}: self.{ref} may be absent"


def _undescribed(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _undescribed(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [_undescribed(v) for v in node]
    return node


def test_the_reverse_direction_is_described_from_the_providers_side() -> None:
    """spec.reverse.offloading has spec.offloading's schema, but the provider consumes this cluster there: what
    kubectl explain says of it names the cluster asked and the cluster that gets the virtual node that way."""
    forward = SPEC["properties"]["offloading"]
    reverse = SPEC["properties"]["reverse"]["properties"]["offloading"]
    assert _undescribed(reverse) == _undescribed(forward)
    for path, node in walk(reverse, "spec.reverse.offloading"):
        said = node.get("description", "")
        assert "lets the provider decide" not in said and "this cluster's Nodes" not in said, path
        assert "virtual node on this cluster" not in said, path
    fields = reverse["properties"]
    assert "the provider asks this cluster" in reverse["description"]
    assert "Empty lets this cluster decide" in fields["resources"]["description"]
    assert "virtual node on the provider" in fields["createVirtualNode"]["description"]
    assert "the provider's Nodes" in fields["resourceSlices"]["items"]["properties"]["name"]["description"]
    assert "Empty lets the provider decide" in forward["properties"]["resources"]["description"]
    assert "virtual node on this cluster" in forward["properties"]["createVirtualNode"]["description"]


# -- API reference ---------------------------------------------------------------------------


def test_api_doc_lists_every_spec_field_and_rule() -> None:
    doc = crdgen.render_peering_doc()
    for path, _ in walk(SPEC, "spec"):
        # A list's items are described by the list's row; their fields have rows of their own.
        if path != "spec" and not path.endswith(".*") and not path.endswith("[]"):
            assert f"| `{path}` |" in doc, path
    for _, _, rule in cel_rules():
        assert rule["message"] in doc
    assert '| `spec.timeout` | string | `"5m"` |' in doc
    assert "| `spec.remoteKubeconfigSecretRef` | object |  |" in doc
    assert "| `spec.remoteClusterProfileRef.name` | string | required |" in doc


def test_each_kind_has_a_field_reference_of_its_own() -> None:
    peering, peering_set = crdgen.render_peering_doc(), crdgen.render_set_doc()
    assert peering.splitlines()[1] == "# LiqoPeering fields"
    assert peering_set.splitlines()[1] == "# LiqoPeeringSet fields"
    assert "[LiqoPeering](liqopeering.md)" in peering and "[LiqoPeeringSet](liqopeeringset.md)" in peering_set
    assert "`spec.selector`" not in peering and "`spec.remoteKubeconfigSecretRef`" not in peering_set
    for doc in (peering, peering_set):
        assert [line for line in doc.splitlines() if line.startswith("#")] == [
            doc.splitlines()[1],
            "## spec",
            "## Admission rules (CEL)",
            "## status",
        ]
