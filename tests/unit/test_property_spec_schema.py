"""Property: the pydantic spec model and the CRD's OpenAPI schema (with its CEL rules) accept the same specs,
and what one accepts round-trips through the other.

The API server's side is modelled here: it prunes nulls, applies the schema's defaults, validates the
structural schema (jsonschema, with Go's end-of-text ``$``) and evaluates the CEL rules (cel-python).
Specs come from both schemas (``from_schema`` below), plus near misses: one leaf replaced by another
value of the same JSON type (type coercion is not compared: the API server never hands the operator a
wrongly typed field). ``isURL`` is Go's ``url.Parse``, which neither side reproduces: proxyURL values
are drawn from plain http(s) URLs, which it accepts.
"""

from __future__ import annotations

import contextlib
import copy
import re
from collections.abc import Callable, Iterator
from typing import Any

import celpy
import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from hack import crdgen
from liqo_peering.api import model, peeringset
from unit.structural import apply_defaults, creation_rules

SPEC: dict[str, Any] = crdgen.render_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
# A URL Go's url.Parse takes (the only proxyURL values drawn, see the module docstring).
URL_PATTERN = r"^https?://[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(:[0-9]{1,5})?$"
SETTINGS = settings(max_examples=60)


# -- the API server's side ---------------------------------------------------------------------


def _structural(node: Any) -> Any:
    """The CRD schema as plain JSON Schema: no Kubernetes extensions, defaults or descriptions."""
    if isinstance(node, list):
        return [_structural(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {k: _structural(v) for k, v in node.items() if not k.startswith("x-kubernetes-")}
    out.pop("default", None)
    out.pop("description", None)
    return out


def _go_pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[jsonschema.ValidationError]:
    # Go's RE2 (and pydantic's Rust regex) match "$" at the end of the text only; Python's also before a
    # final newline.
    if isinstance(instance, str) and not re.search(pattern.replace("$", r"\Z"), instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


_Validator = jsonschema.validators.extend(jsonschema.Draft4Validator, {"pattern": _go_pattern})
STRUCTURAL = _Validator(_structural(SPEC))

_CEL = celpy.Environment()


def _is_url(value: Any) -> celpy.celtypes.BoolType:
    return celpy.celtypes.BoolType(isinstance(value, str) and re.fullmatch(URL_PATTERN, value) is not None)


def _cel_programs(schema: dict[str, Any]) -> list[tuple[Callable[[Any], Any], str]]:
    return [
        (_CEL.program(_CEL.compile(rule["rule"]), functions={"isURL": _is_url}).evaluate, rule["rule"])
        for rule in creation_rules(schema)
    ]


def _compile_cel(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema tree with each node's CEL programs alongside (compiled once)."""
    return {
        "programs": _cel_programs(schema),
        "properties": {name: _compile_cel(sub) for name, sub in (schema.get("properties") or {}).items()},
    }


CEL_TREE = _compile_cel(SPEC)


def prune_nulls(value: Any) -> Any:
    """The API server drops null fields a schema does not declare nullable (none here)."""
    if isinstance(value, dict):
        return {k: prune_nulls(v) for k, v in value.items() if v is not None}
    return value


def stored(spec: Any) -> Any:
    """What the API server would store for ``spec`` (before validating it)."""
    return apply_defaults(SPEC, prune_nulls(spec))


def _cel_holds(tree: dict[str, Any], obj: Any) -> bool:
    for evaluate, _rule in tree["programs"]:
        try:
            result = evaluate({"self": celpy.json_to_cel(obj)})
        except celpy.CELEvalError:
            return False
        if result is not True and not (isinstance(result, celpy.celtypes.BoolType) and bool(result)):
            return False
    return all(
        _cel_holds(sub, obj[name])
        for name, sub in tree["properties"].items()
        if isinstance(obj, dict) and isinstance(obj.get(name), dict)
    )


def crd_accepts(spec: Any) -> bool:
    obj = stored(spec)
    return STRUCTURAL.is_valid(obj) and _cel_holds(CEL_TREE, obj)


def model_accepts(spec: Any) -> bool:
    try:
        model.parse_spec(spec)
    except ValidationError:
        return False
    return True


# -- generators --------------------------------------------------------------------------------


def _url_proxy(auth: dict[str, Any]) -> None:
    """Draw the authentication schema's proxyURL from plain URLs (in place)."""
    target = auth["properties"]["proxyURL"]
    if "anyOf" in target:  # pydantic's str | None
        target["anyOf"] = [{"type": "string", "pattern": URL_PATTERN}, {"type": "null"}]
    else:
        target["pattern"] = URL_PATTERN


def _crd_generation_schema() -> dict[str, Any]:
    """The CRD schema, closed (the API server prunes unknown fields; none are drawn)."""

    def close(node: Any) -> Any:
        if isinstance(node, dict):
            node = {k: close(v) for k, v in node.items()}
            if "properties" in node:
                node["additionalProperties"] = False
        elif isinstance(node, list):
            node = [close(v) for v in node]
        return node

    schema: dict[str, Any] = close(_structural(SPEC))
    _url_proxy(schema["properties"]["authentication"])
    return schema


def _model_generation_schema() -> dict[str, Any]:
    schema = copy.deepcopy(model.LiqoPeeringSpec.model_json_schema(by_alias=True))
    _url_proxy(schema["$defs"]["AuthenticationSpec"])
    return schema


def from_schema(node: dict[str, Any], defs: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values a JSON schema accepts, for the keywords these two schemas use."""
    if "$ref" in node:
        target = defs[node["$ref"].rsplit("/", 1)[-1]]
        return from_schema({**target, **{k: v for k, v in node.items() if k != "$ref"}}, defs)
    if "enum" in node:
        return st.sampled_from(node["enum"])
    if "anyOf" in node:
        siblings = {k: v for k, v in node.items() if k not in ("anyOf", "default", "description", "title")}
        return st.one_of([from_schema({**siblings, **branch}, defs) for branch in node["anyOf"]])
    kind = node.get("type")
    if kind == "object" and "properties" in node:
        required = set(node.get("required", []))
        props = {name: from_schema(sub, defs) for name, sub in node["properties"].items()}
        return st.fixed_dictionaries(
            {k: v for k, v in props.items() if k in required},
            optional={k: v for k, v in props.items() if k not in required},
        )
    if kind == "object":
        return st.dictionaries(st.text(max_size=20), from_schema(node["additionalProperties"], defs), max_size=4)
    if kind == "string":
        low, high = node.get("minLength", 0), node.get("maxLength", 70)
        if "pattern" in node:
            return st.from_regex(node["pattern"], fullmatch=True).filter(lambda v: low <= len(v) <= high)
        return st.text(min_size=low, max_size=high)
    if kind == "integer":
        # The API server decodes integers as int64.
        return st.integers(min_value=node.get("minimum", -(2**63)), max_value=node.get("maximum", 2**63 - 1))
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        # A few items, names from a small set, so that duplicates are drawn too.
        items = node["items"]
        if "$ref" in items:
            items = defs[items["$ref"].rsplit("/", 1)[-1]]
        if "name" in (items.get("properties") or {}):
            items = {**items, "properties": {**items["properties"], "name": {"enum": ["a", "b", "c"]}}}
        low = node.get("minItems", 0)
        return st.lists(from_schema(items, defs), min_size=low, max_size=max(low, min(node["maxItems"], 3)))
    if kind == "null":
        return st.none()
    raise AssertionError(f"no strategy for {node}")


_MODEL_SCHEMA = _model_generation_schema()
FROM_CRD = from_schema(_crd_generation_schema(), {})
FROM_MODEL = from_schema(_MODEL_SCHEMA, _MODEL_SCHEMA["$defs"])


def _leaves(obj: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    if isinstance(obj, dict) and obj:
        return [leaf for k, v in obj.items() for leaf in _leaves(v, (*path, k))]
    return [(path, obj)]


def _same_type_as(value: bool | int | str) -> st.SearchStrategy[Any]:
    if isinstance(value, bool):
        return st.booleans()
    if isinstance(value, int):
        return st.integers(min_value=-(2**31), max_value=2**31) | st.sampled_from(
            [0, 1, 575, 576, 9000, 9001, 65535, 65536]
        )
    return st.text(max_size=70) | st.sampled_from(["", "a", "LIQO", "-a", "a-", "1h30m", "5", "1.5h", "Gi", "1e3"])


@st.composite
def near_misses(draw: st.DrawFn) -> Any:
    """A valid spec with one scalar replaced by another of the same type (values near the bounds and
    patterns are likelier)."""
    spec = draw(FROM_CRD | FROM_MODEL)
    leaves = [
        (path, v)
        for path, v in _leaves(spec)
        if path and isinstance(v, bool | int | str) and path[-1] != "proxyURL"  # isURL: see the module docstring
    ]
    if not leaves:
        return spec
    path, value = draw(st.sampled_from(leaves))
    spec = copy.deepcopy(spec)
    node = spec
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = draw(_same_type_as(value))
    return spec


# -- properties --------------------------------------------------------------------------------


def _check_agreement(spec: Any) -> None:
    accepted = crd_accepts(spec)
    assert model_accepts(spec) == accepted, f"CRD {'accepts' if accepted else 'rejects'} {spec!r}"
    if not accepted:
        return
    parsed = model.parse_spec(spec)
    # The operator reads what the API server stored: defaults agree.
    assert model.parse_spec(stored(spec)) == parsed
    # And the model's own rendering is a spec the CRD takes, reading back the same.
    dumped = parsed.model_dump(by_alias=True, exclude_none=True)
    assert crd_accepts(dumped)
    assert model.parse_spec(dumped) == parsed
    assert model.parse_spec(stored(dumped)) == parsed


@SETTINGS
@given(FROM_CRD)
def test_specs_drawn_from_the_crd_schema_agree(spec: Any) -> None:
    _check_agreement(spec)


@SETTINGS
@given(FROM_MODEL)
def test_specs_drawn_from_the_model_schema_agree(spec: Any) -> None:
    _check_agreement(spec)


@SETTINGS
@given(near_misses())
def test_near_misses_are_judged_alike(spec: Any) -> None:
    _check_agreement(spec)


def test_the_oracle_evaluates_every_cel_rule() -> None:
    """The CEL side is not vacuous: each rule rejects a spec of its own."""
    base: dict[str, Any] = {"remoteKubeconfigSecretRef": {"name": "k"}}
    broken: list[dict[str, Any]] = [
        {"networking": {"gatewayServer": {"serviceType": "LoadBalancer", "nodePort": 30000}}},
        {"networking": {"gatewayServer": {"serviceType": "NodePort", "loadBalancerIP": "10.0.0.1"}}},
        {"authentication": {"proxyURL": "not a url"}},
        {"offloading": {"createResourceSlice": False}},
        {"networking": {"enabled": False}, "authentication": {"inBand": True}},
        {"offloading": {"resourceSliceClass": "gold", "resourceSlices": [{"name": "a"}]}},
        {"offloading": {"resourceSlices": [{"name": "a"}, {"name": "b", "class": "gold"}, {"name": "a"}]}},
    ]
    assert crd_accepts(base) and model_accepts(base)
    for extra in broken:
        assert not crd_accepts({**base, **extra}), extra
    # isURL is the API server's alone (module docstring): the model takes any proxyURL string.
    for extra in broken[:2] + broken[3:]:
        assert not model_accepts({**base, **extra}), extra
    # The provider source: exactly one, and a ClusterProfile neither mints nor takes a context.
    profile: dict[str, Any] = {"remoteClusterProfileRef": {"name": "p"}}
    assert crd_accepts(profile) and model_accepts(profile)
    for spec in (
        {},
        {**base, **profile},
        {**profile, "credentials": {"mint": True}},
        {**profile, "remoteContext": "c"},
    ):
        assert not crd_accepts(spec), spec
        assert not model_accepts(spec), spec


# -- any JSON at all ---------------------------------------------------------------------------
# Input that bypassed admission: the model's only answers are a model or a ValidationError, whatever the JSON
# (wrong types at any depth, huge numbers, odd strings), for both kinds' specs.

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from([2**63, -(2**63) - 1, 10**400])
    | st.floats()
    | st.text(max_size=20)
    | st.sampled_from(["5m", "1h" * 40, "", "LoadBalancer", "Consumer", "10.0.0.1", "\x00", "1e999"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@st.composite
def mangled_specs(draw: st.DrawFn) -> Any:
    """A valid spec with a few values anywhere replaced by any JSON (keys of the schema are likelier)."""
    spec = copy.deepcopy(draw(FROM_MODEL))
    for _ in range(draw(st.integers(1, 3))):
        path, _value = draw(st.sampled_from(_leaves(spec)))
        node = spec
        for key in path[:-1]:
            node = node[key]
        if path:
            node[path[-1]] = draw(json_values)
    return spec


def _model_answers(spec: Any, validate: Callable[[Any], Any]) -> None:
    with contextlib.suppress(ValidationError):
        validate(spec)


@SETTINGS
@given(json_values | mangled_specs())
def test_any_json_is_a_spec_or_a_validation_error(spec: Any) -> None:
    _model_answers(spec, model.parse_spec)


@SETTINGS
@given(json_values | st.fixed_dictionaries({"selector": json_values}, optional={"template": json_values}))
def test_any_json_is_a_set_spec_or_a_validation_error(spec: Any) -> None:
    _model_answers(spec, peeringset.LiqoPeeringSetSpec.model_validate)
