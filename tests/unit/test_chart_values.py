"""values.yaml and values.schema.json describe the same keys; the RBAC rules are documented."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import yaml

CHART = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "liqo-peering-operator"
VALUES = yaml.safe_load((CHART / "values.yaml").read_text())
SCHEMA = json.loads((CHART / "values.schema.json").read_text())

TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "integer": int}


def walk(values: dict[str, Any], schema: dict[str, Any], path: str = "") -> list[str]:
    """Problems: keys the schema lacks, and defaults of the wrong type."""
    problems = []
    props = schema.get("properties", {})
    for key, value in values.items():
        where = f"{path}{key}"
        sub = props.get(key)
        if sub is None:
            if schema.get("additionalProperties", True) is False or not props:
                problems.append(f"{where}: not in values.schema.json")
            continue
        kind = sub.get("type", "")
        expected = tuple(TYPES[k] for k in kind if k in TYPES) if isinstance(kind, list) else TYPES.get(kind)
        if expected and not isinstance(value, expected):
            problems.append(f"{where}: default {value!r} is not {sub['type']}")
        if "enum" in sub and value not in sub["enum"]:
            problems.append(f"{where}: default {value!r} not in {sub['enum']}")
        if isinstance(value, dict) and "properties" in sub:
            problems += walk(value, sub, where + ".")
    return problems


def test_schema_is_draft_07_and_closed_at_the_top() -> None:
    assert SCHEMA["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert SCHEMA["additionalProperties"] is False


def test_every_value_is_in_the_schema() -> None:
    assert walk(VALUES, SCHEMA) == []


def test_every_schema_key_has_a_default_and_a_description() -> None:
    def keys(schema: dict[str, Any], values: dict[str, Any], path: str = "") -> list[str]:
        problems = []
        for key, sub in schema.get("properties", {}).items():
            where = f"{path}{key}"
            if key not in values:
                problems.append(f"{where}: no default in values.yaml")
                continue
            if not sub.get("description"):
                problems.append(f"{where}: no description")
            if "properties" in sub and sub.get("additionalProperties") is False:
                problems += keys(sub, values[key], where + ".")
        return problems

    assert keys(SCHEMA, VALUES) == []


def test_the_defaults_pass_the_schema_and_a_peering_lifetime_kopf_cannot_keep_alive_does_not() -> None:
    validator = jsonschema.Draft7Validator(SCHEMA)
    assert [e.message for e in validator.iter_errors(VALUES)] == []
    assert VALUES["ha"]["peeringLifetime"] == 30

    def errors(lifetime: Any) -> list[str]:
        values = {**VALUES, "ha": {**VALUES["ha"], "peeringLifetime": lifetime}}
        return [f"{'/'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(values)]

    assert errors(11) == [] and errors(15) == []
    for bad in (10, 0, -30, 15.5, "30", None):
        assert [e.split(":")[0] for e in errors(bad)] == ["ha/peeringLifetime"], bad


def test_hardened_defaults() -> None:
    ctx = VALUES["securityContext"]
    assert ctx["runAsNonRoot"] is True and ctx["runAsUser"] == 65532
    assert ctx["readOnlyRootFilesystem"] is True and ctx["allowPrivilegeEscalation"] is False
    assert ctx["capabilities"] == {"drop": ["ALL"]}
    assert ctx["seccompProfile"] == {"type": "RuntimeDefault"}
    assert VALUES["podSecurityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert VALUES["insecureKubeconfig"] == {"exec": False, "tls": False}
    assert VALUES["replicaCount"] == 1 and VALUES["ha"]["enabled"] is False


def test_every_rbac_rule_has_a_comment() -> None:
    """Each `- apiGroups:` rule in the templates is preceded by a comment line (or another rule's comment)."""
    for name in ("clusterrole.yaml", "_rbac.tpl", "role.yaml"):
        lines = (CHART / "templates" / name).read_text().splitlines()
        for i, line in enumerate(lines):
            if line.strip().startswith("- apiGroups:"):
                above = [ln.strip() for ln in lines[max(0, i - 8) : i]]
                # The comment may sit above a preceding rule of the same group (split verbs) or a template line.
                context = [ln for ln in above if ln and not ln.startswith("{{")]
                assert any(ln.startswith("#") for ln in context), f"{name}:{i + 1} has no comment"


def test_rbac_resources_are_explained_in_values() -> None:
    text = (CHART / "values.yaml").read_text()
    rbac_comment = text[text.index("rbac:") : text.index("crds:")]
    resources = set()
    for name in ("clusterrole.yaml", "_rbac.tpl", "role.yaml"):
        template = (CHART / "templates" / name).read_text()
        for match in re.finditer(r"resources: \[([^\]]*)\]", template):
            resources |= {r.strip().strip('"').split("/")[0] for r in match.group(1).split(",")}
    missing = {r for r in resources if r.lower() not in rbac_comment.lower()}
    # CRDs are explained as "CustomResourceDefinitions"; kopf peerings as "kopf.dev peering objects".
    missing -= {"customresourcedefinitions", "kopfpeerings", "clusterkopfpeerings"}
    assert missing == set()
