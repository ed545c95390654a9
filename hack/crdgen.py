"""Generate the CRDs (LiqoPeering, LiqoPeeringSet) and their field references from the pydantic models.

``python hack/crdgen.py`` (``make generate``) writes ``crds/`` and one field reference page per kind,
``docs/reference/liqopeering-fields.md`` and ``docs/reference/liqopeeringset-fields.md`` (and refreshes the
Helm chart's copies when the chart's sync script exists); ``--check`` only reports drift. Unit tests call
:func:`render_crd`, :func:`render_set_crd`, :func:`render_peering_doc` and :func:`render_set_doc` and compare
with the committed files.
Build-time code: it reads the runtime package (``liqo_peering``) and is not part of it.
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from liqo_peering.api import model, peeringset
from liqo_peering.stages import STAGES

CRD_NAME = f"{model.PLURAL}.{model.GROUP}"
CRD_FILE = Path("crds") / f"{model.GROUP}_{model.PLURAL}.yaml"
SET_CRD_NAME = f"{peeringset.PLURAL}.{model.GROUP}"
SET_CRD_FILE = Path("crds") / f"{model.GROUP}_{peeringset.PLURAL}.yaml"
DOC_FILE = Path("docs") / "reference" / "liqopeering-fields.md"
SET_DOC_FILE = Path("docs") / "reference" / "liqopeeringset-fields.md"

PRINTER_COLUMNS: list[dict[str, Any]] = [
    {"name": "Remote Cluster", "type": "string", "jsonPath": ".status.remoteClusterID"},
    {"name": "Status", "type": "string", "jsonPath": ".status.peerStatus"},
    {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
    {"name": "Reason", "type": "string", "priority": 1, "jsonPath": '.status.conditions[?(@.type=="Ready")].reason'},
    {"name": "Stage", "type": "string", "priority": 1, "jsonPath": ".status.stage"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]
SET_PRINTER_COLUMNS: list[dict[str, Any]] = [
    {"name": "Desired", "type": "integer", "jsonPath": ".status.desired"},
    {"name": "Ready", "type": "integer", "jsonPath": ".status.ready"},
    {"name": "Establishing", "type": "integer", "jsonPath": ".status.establishing"},
    {"name": "Error", "type": "integer", "jsonPath": ".status.error"},
    {"name": "All Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
    {"name": "Reason", "type": "string", "priority": 1, "jsonPath": '.status.conditions[?(@.type=="Ready")].reason'},
    {"name": "Waiting", "type": "integer", "priority": 1, "jsonPath": ".status.waiting"},
    {"name": "Unavailable", "type": "integer", "priority": 1, "jsonPath": ".status.unavailable"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def _resolve(node: Any, defs: dict[str, Any], object_defaults: bool = False) -> Any:
    """Turn pydantic's JSON schema into a Kubernetes structural schema.

    With ``object_defaults``, optional nested objects get ``default: {}`` so their own defaults always
    apply and CEL rules can read them without has() guards (used for spec, not status).
    """
    if isinstance(node, list):
        return [_resolve(item, defs, object_defaults) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = copy.deepcopy(defs[node["$ref"].rsplit("/", 1)[-1]])
        target.update({k: v for k, v in node.items() if k != "$ref"})
        return _resolve(target, defs, object_defaults)
    out: dict[str, Any] = {}
    any_of = node.get("anyOf")
    if any_of is not None:
        branches = [b for b in any_of if b.get("type") != "null"]
        types = sorted(b.get("type", "") for b in branches)
        if len(branches) == 1:
            merged = {**{k: v for k, v in node.items() if k != "anyOf"}, **branches[0]}
            if merged.get("default", 0) is None:
                merged.pop("default")
            return _resolve(merged, defs, object_defaults)
        if types == ["integer", "string"]:
            string = next(b for b in branches if b["type"] == "string")
            out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
            out["x-kubernetes-int-or-string"] = True
            # The API server applies these to the string form only.
            for key in ("pattern", "maxLength"):
                if key in string:
                    out[key] = string[key]
            node = {k: v for k, v in node.items() if k != "anyOf"}
        else:
            raise ValueError(f"unsupported union in schema: {any_of}")
    for key, value in node.items():
        if key in ("title", "$defs"):
            continue
        if key == "additionalProperties" and value is False:
            continue  # the API server prunes and rejects unknown fields already; structural schemas forbid it
        if key == "properties":
            required = set(node.get("required", []))
            props = {name: _resolve(sub, defs, object_defaults) for name, sub in value.items()}
            for name, sub in props.items():
                # An optional object whose absence means something (default None) gets no default.
                absent = (value[name].get("default", 0) is None) if isinstance(value[name], dict) else False
                if absent or name in required or not object_defaults:
                    continue
                if sub.get("type") == "object" and "properties" in sub:
                    sub.setdefault("default", _object_default(sub))
            out[key] = props
        else:
            out[key] = _resolve(value, defs, object_defaults)
    if out.get("default", 0) is None:
        out.pop("default")
    return out


def _object_default(schema: dict[str, Any]) -> dict[str, Any]:
    """The fully defaulted value of an object schema.

    The API server checks a default against the CEL rules without applying the nested defaults first,
    so `default: {}` would fail rules that read nested fields: spell every nested default out.
    """
    out: dict[str, Any] = {}
    for name, sub in schema.get("properties", {}).items():
        if "default" in sub:
            out[name] = copy.deepcopy(sub["default"])
        elif sub.get("type") == "object" and "properties" in sub and name not in schema.get("required", []):
            if not sub.get("required"):  # one with required fields is absent until given (default None)
                out[name] = _object_default(sub)
        elif sub.get("type") == "object" and "additionalProperties" in sub:
            out[name] = {}  # an empty map, as pydantic's default_factory=dict
    return out


def openapi_schema(cls: type[BaseModel], object_defaults: bool = False) -> dict[str, Any]:
    raw = cls.model_json_schema(by_alias=True)
    return dict(_resolve(raw, raw.get("$defs", {}), object_defaults))


# LiqoPeeringSpec's provider source (one of them is set), listed first as a required field would be.
SOURCE_FIELDS = ("remoteKubeconfigSecretRef", "remoteClusterProfileRef", "remoteCluster")


def _required_first(schema: dict[str, Any]) -> dict[str, Any]:
    """Required properties first, then the provider source (LiqoPeeringSpec inherits the template's fields
    before its own)."""
    props = schema["properties"]
    required = [*schema.get("required", []), *(k for k in SOURCE_FIELDS if k in props)]
    schema["properties"] = {**{k: props[k] for k in required}, **{k: v for k, v in props.items() if k not in required}}
    return schema


def _status_schema(cls: type[BaseModel]) -> dict[str, Any]:
    status = openapi_schema(cls)
    status["properties"]["conditions"].update({"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]})
    # Until the operator first writes a status, the API server serves one that says "generation not yet
    # observed": kstatus (Flux's `wait: true`, cli-utils) reads a custom resource without a status as
    # Current, so a Kustomization applying a LiqoPeering was Ready before the operator had even seen it
    # (tests/e2e/test_flux.py). Defaults are applied on every read, so this needs no write.
    status["default"] = {"observedGeneration": 0}
    return status


def _crd(
    kind: str,
    plural: str,
    singular: str,
    short_names: tuple[str, ...],
    columns: list[dict[str, Any]],
    root: dict[str, Any],
) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{model.GROUP}"},
        "spec": {
            "group": model.GROUP,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": singular,
                "shortNames": list(short_names),
                "categories": list(model.CATEGORIES),
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": model.VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": columns,
                    "schema": {"openAPIV3Schema": root},
                }
            ],
        },
    }


def render_crd() -> dict[str, Any]:
    spec_schema = _required_first(openapi_schema(model.LiqoPeeringSpec, object_defaults=True))
    status_schema = _status_schema(model.LiqoPeeringStatus)
    # Liqo may add fields to its conditions; the mirror keeps them verbatim.
    mirror = status_schema["properties"]["foreignCluster"]
    mirror["properties"]["conditions"]["items"]["x-kubernetes-preserve-unknown-fields"] = True
    for module in STAGES:
        items = mirror["properties"]["modules"]["properties"][module]["properties"]["conditions"]["items"]
        items["x-kubernetes-preserve-unknown-fields"] = True
    root = {
        "type": "object",
        "description": (
            "LiqoPeering peers this cluster (the consumer) with a provider cluster through Liqo:"
            " networking, authentication and offloading, as liqoctl peer does."
        ),
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec_schema,
            "status": status_schema,
        },
    }
    return _crd(model.KIND, model.PLURAL, model.SINGULAR, model.SHORT_NAMES, PRINTER_COLUMNS, root)


def render_set_crd() -> dict[str, Any]:
    spec_schema = _required_first(openapi_schema(peeringset.LiqoPeeringSetSpec, object_defaults=True))
    status_schema = _status_schema(peeringset.LiqoPeeringSetStatus)
    status_schema["properties"]["peerings"].update(
        {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]}
    )
    root = {
        "type": "object",
        "description": (
            "LiqoPeeringSet keeps one LiqoPeering per kubeconfig Secret its selector picks in its namespace,"
            " each from its template, and reports on all of them."
        ),
        "required": ["spec"],
        "x-kubernetes-validations": [peeringset.NAME_RULE],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec_schema,
            "status": status_schema,
        },
    }
    return _crd(
        peeringset.KIND, peeringset.PLURAL, peeringset.SINGULAR, peeringset.SHORT_NAMES, SET_PRINTER_COLUMNS, root
    )


def dump_crd(crd: dict[str, Any] | None = None) -> str:
    header = "# Generated by `make generate` (python hack/crdgen.py) from the pydantic model. Do not edit.\n"
    return header + yaml.safe_dump(render_crd() if crd is None else crd, sort_keys=False, width=120)


def _doc_rows(schema: dict[str, Any], prefix: str, items: bool = False) -> list[str]:
    """One table row per field; ``items``: also the fields of list items (``path[].field``)."""
    rows: list[str] = []
    required = set(schema.get("required", []))
    for name, sub in schema.get("properties", {}).items():
        path = f"{prefix}.{name}" if prefix else name
        kind = sub.get("type", "int or string" if sub.get("x-kubernetes-int-or-string") else "")
        if "enum" in sub:
            kind = " \\| ".join(sub["enum"])
        if kind == "object" and "additionalProperties" in sub:
            kind = "map"
        default = sub.get("default")
        shown = "required" if name in required else ("" if default in (None, {}) else f"`{json.dumps(default)}`")
        rows.append(f"| `{path}` | {kind} | {shown} | {sub.get('description', '')} |")
        if sub.get("type") == "object" and "properties" in sub:
            rows.extend(_doc_rows(sub, path, items))
        if items and "properties" in (sub.get("items") or {}):
            rows.extend(_doc_rows(sub["items"], f"{path}[]", items))
    return rows


def _rules(schema: dict[str, Any], prefix: str) -> list[str]:
    found = [f"- `{prefix or 'spec'}`: {r['message']}" for r in schema.get("x-kubernetes-validations", [])]
    for name, sub in schema.get("properties", {}).items():
        found.extend(_rules(sub, f"{prefix}.{name}" if prefix else f"spec.{name}"))
    if isinstance(schema.get("items"), dict):
        found.extend(_rules(schema["items"], f"{prefix}[]"))
    return found


def _kind_doc(kind: str, spec_cls: type[BaseModel], status_cls: type[BaseModel], source: str, guide: str) -> list[str]:
    spec = _required_first(openapi_schema(spec_cls, object_defaults=True))
    return [
        f"<!-- Generated by `make generate` from operator/liqo_peering/api/{source}. Do not edit. -->",
        f"# {kind} fields",
        "",
        f"Every field of `{kind}` (`{model.API_VERSION}`) with its type, its default and the description"
        " `kubectl explain` shows; the rules the API server checks when it is written; and the status the"
        f" operator writes. What each field does, with examples, is in [{kind}]({guide}).",
        "",
        "## spec",
        "",
        "| field | type | default | description |",
        "| --- | --- | --- | --- |",
        *_doc_rows(spec, "spec", items=True),
        "",
        "## Admission rules (CEL)",
        "",
        *_rules(spec, "spec"),
        "",
        "## status",
        "",
        "| field | type | default | description |",
        "| --- | --- | --- | --- |",
        *_doc_rows(openapi_schema(status_cls), "status"),
        "",
    ]


def render_peering_doc() -> str:
    """The LiqoPeering field reference (DOC_FILE)."""
    return "\n".join(
        _kind_doc(model.KIND, model.LiqoPeeringSpec, model.LiqoPeeringStatus, "model.py", "liqopeering.md")
    )


def render_set_doc() -> str:
    """The LiqoPeeringSet field reference (SET_DOC_FILE)."""
    lines = _kind_doc(
        peeringset.KIND,
        peeringset.LiqoPeeringSetSpec,
        peeringset.LiqoPeeringSetStatus,
        "peeringset.py and model.py",
        "liqopeeringset.md",
    )
    # The set's name rule sits on the object, not the spec.
    at = lines.index("## Admission rules (CEL)")
    lines.insert(at + 2, f"- `metadata.name`: {peeringset.NAME_RULE['message']}")
    return "\n".join(lines)


def outputs() -> dict[Path, str]:
    return {
        CRD_FILE: dump_crd(),
        SET_CRD_FILE: dump_crd(render_set_crd()),
        DOC_FILE: render_peering_doc(),
        SET_DOC_FILE: render_set_doc(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", type=Path, default=Path.cwd())
    parser.add_argument("--check", action="store_true", help="report drift instead of writing")
    args = parser.parse_args(argv)
    drift = []
    for rel, text in outputs().items():
        path = args.root / rel
        if path.exists() and path.read_text() == text:
            continue
        drift.append(str(rel))
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    sync = args.root / "hack" / "sync-chart-crd.py"
    if sync.exists() and not args.check:
        subprocess.run([sys.executable, str(sync)], check=True, cwd=args.root)
    if args.check and drift:
        print("out of date, run `make generate`: " + ", ".join(drift), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
