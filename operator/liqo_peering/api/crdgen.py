"""Generate the CRD and the API reference from the pydantic model.

``python -m liqo_peering.api.crdgen`` writes ``crds/`` and ``docs/api.md`` (and refreshes the Helm
chart's copy when the chart's sync script exists); ``--check`` only reports drift. Unit tests call
:func:`render_crd` and :func:`render_api_doc` and compare with the committed files.
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

from liqo_peering.api import model
from liqo_peering.stages import STAGES

CRD_NAME = f"{model.PLURAL}.{model.GROUP}"
CRD_FILE = Path("crds") / f"{model.GROUP}_{model.PLURAL}.yaml"
DOC_FILE = Path("docs") / "api.md"

PRINTER_COLUMNS = [
    {"name": "Remote Cluster", "type": "string", "jsonPath": ".status.remoteClusterID"},
    {"name": "Status", "type": "string", "jsonPath": ".status.peerStatus"},
    {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
    {"name": "Reason", "type": "string", "priority": 1, "jsonPath": '.status.conditions[?(@.type=="Ready")].reason'},
    {"name": "Stage", "type": "string", "priority": 1, "jsonPath": ".status.stage"},
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
            if "pattern" in string:
                out["pattern"] = string["pattern"]
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
                if object_defaults and name not in required and sub.get("type") == "object" and "properties" in sub:
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
            out[name] = _object_default(sub)
        elif sub.get("type") == "object" and "additionalProperties" in sub:
            out[name] = {}  # an empty map, as pydantic's default_factory=dict
    return out


def openapi_schema(cls: type[BaseModel], object_defaults: bool = False) -> dict[str, Any]:
    raw = cls.model_json_schema(by_alias=True)
    return dict(_resolve(raw, raw.get("$defs", {}), object_defaults))


def render_crd() -> dict[str, Any]:
    spec_schema = openapi_schema(model.LiqoPeeringSpec, object_defaults=True)
    status_schema = openapi_schema(model.LiqoPeeringStatus)
    # Liqo may add fields to its conditions; the mirror keeps them verbatim.
    mirror = status_schema["properties"]["foreignCluster"]
    mirror["properties"]["conditions"]["items"]["x-kubernetes-preserve-unknown-fields"] = True
    for module in STAGES:
        items = mirror["properties"]["modules"]["properties"][module]["properties"]["conditions"]["items"]
        items["x-kubernetes-preserve-unknown-fields"] = True
    status_schema["properties"]["conditions"].update(
        {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]}
    )
    # Until the operator first writes a status, the API server serves one that says "generation not yet
    # observed": kstatus (Flux's `wait: true`, cli-utils) reads a custom resource without a status as
    # Current, so a Kustomization applying a LiqoPeering was Ready before the operator had even seen it
    # (tests/e2e/test_flux.py). Defaults are applied on every read, so this needs no write.
    status_schema["default"] = {"observedGeneration": 0}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME},
        "spec": {
            "group": model.GROUP,
            "names": {
                "kind": model.KIND,
                "listKind": f"{model.KIND}List",
                "plural": model.PLURAL,
                "singular": model.SINGULAR,
                "shortNames": model.SHORT_NAMES,
                "categories": model.CATEGORIES,
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": model.VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": PRINTER_COLUMNS,
                    "schema": {
                        "openAPIV3Schema": {
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
                    },
                }
            ],
        },
    }


def dump_crd() -> str:
    header = (
        "# Generated by `make generate` (python -m liqo_peering.api.crdgen) from the pydantic model. Do not edit.\n"
    )
    return header + yaml.safe_dump(render_crd(), sort_keys=False, width=120)


def _doc_rows(schema: dict[str, Any], prefix: str) -> list[str]:
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
            rows.extend(_doc_rows(sub, path))
    return rows


def _rules(schema: dict[str, Any], prefix: str) -> list[str]:
    found = [f"- `{prefix or 'spec'}`: {r['message']}" for r in schema.get("x-kubernetes-validations", [])]
    for name, sub in schema.get("properties", {}).items():
        found.extend(_rules(sub, f"{prefix}.{name}" if prefix else f"spec.{name}"))
    return found


def render_api_doc() -> str:
    spec = openapi_schema(model.LiqoPeeringSpec, object_defaults=True)
    lines = [
        "<!-- Generated by `make generate` from operator/liqo_peering/api/model.py. Do not edit. -->",
        f"# {model.KIND} `{model.API_VERSION}` reference",
        "",
        "## spec",
        "",
        "| field | type | default | description |",
        "| --- | --- | --- | --- |",
        *_doc_rows(spec, "spec"),
        "",
        "## Admission rules (CEL)",
        "",
        *_rules(spec, "spec"),
        "",
        "## status",
        "",
        "| field | type | default | description |",
        "| --- | --- | --- | --- |",
        *_doc_rows(openapi_schema(model.LiqoPeeringStatus), "status"),
        "",
    ]
    return "\n".join(lines)


def outputs() -> dict[Path, str]:
    return {CRD_FILE: dump_crd(), DOC_FILE: render_api_doc()}


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
