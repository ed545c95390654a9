"""How Liqo stores what the operator sends, so that the operator never writes what would change nothing.

Liqo's controllers update their objects through Go structs: empty maps, lists and strings tagged
``omitempty`` vanish, absent scalars read back as their zero value, and resource quantities come back
in Go's canonical form (``1000m`` -> ``1``, ``1024Mi`` -> ``1Gi``). An apply that sends what Liqo then
drops starts a write war: each side undoes the other forever. So builders send nothing empty and only
canonical quantities, and ``covers`` tells whether a stored object already holds everything wanted.
"""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, Decimal
from types import MappingProxyType
from typing import Any

from liqo_peering.liqo.naming import COMMON_METADATA

# resource.Quantity: <sign><digits>[.<digits>][<suffix>], suffix binary (Ki..Ei), decimal (n..E) or e<exp>.
_QUANTITY = re.compile(r"^([+-]?[0-9]*\.?[0-9]*)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$")
_BINARY = MappingProxyType({"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6})
_DECIMAL = MappingProxyType({"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18})
_DECIMAL_SUFFIX = MappingProxyType({exp: suffix for suffix, exp in _DECIMAL.items()})
_BINARY_SUFFIX = MappingProxyType({power: suffix for suffix, power in _BINARY.items()})
_NANO = Decimal("1e-9")


def canonical_quantity(value: str | int) -> str:
    """The string Go's resource.Quantity.String() gives for ``value`` (the form Liqo writes back).

    Parsing rounds up to nano precision, as Go does. The format follows the suffix: binary suffixes
    stay binary when the value is a whole number of at least 1024, otherwise the value is shown in
    decimal SI with the largest suffix that keeps the mantissa whole; an ``e`` exponent stays one.
    """
    text = str(value).strip()
    match = _QUANTITY.match(text)
    if not match or match.group(1) in ("", "+", "-", "."):
        raise ValueError(f"not a quantity: {value!r}")
    number, suffix = Decimal(match.group(1)), match.group(2) or ""
    if suffix in _BINARY:
        amount, fmt = number * (Decimal(1024) ** _BINARY[suffix]), "binary"
    elif suffix in _DECIMAL:
        amount, fmt = number.scaleb(_DECIMAL[suffix]), "decimal"
    else:
        amount, fmt = number.scaleb(int(suffix[1:])), "exponent"
    amount = (amount / _NANO).to_integral_value(rounding=ROUND_CEILING) * _NANO
    if amount == 0:
        return "0"
    if fmt == "binary" and (abs(amount) < 1024 or amount != amount.to_integral_value()):
        fmt = "decimal"
    if fmt == "binary":
        whole, power = int(amount), 0
        while power < 6 and whole % 1024 == 0:
            whole, power = whole // 1024, power + 1
        return f"{whole}{_BINARY_SUFFIX.get(power, '')}"
    # Whole mantissa with an exponent that is a multiple of three, the largest that keeps it whole.
    exp = -9
    mantissa = int(amount.scaleb(9))
    while mantissa % 1000 == 0 and mantissa != 0:
        mantissa, exp = mantissa // 1000, exp + 3
    if fmt == "exponent":
        return f"{mantissa}e{exp}" if exp else str(mantissa)
    if exp > 18:
        mantissa, exp = mantissa * 10 ** (exp - 18), 18
    return f"{mantissa}{_DECIMAL_SUFFIX[exp]}"


def is_empty(value: Any) -> bool:
    return value is None or value == "" or value == {} or value == []


def prune(obj: Any) -> Any:
    """``obj`` without empty maps, lists, strings or nulls, at any depth (what omitempty keeps)."""
    if isinstance(obj, dict):
        pruned = {k: prune(v) for k, v in obj.items()}
        return {k: v for k, v in pruned.items() if not is_empty(v)}
    if isinstance(obj, list):
        return [prune(v) for v in obj]
    return obj


def _zero(value: Any) -> bool:
    return value is False or (isinstance(value, int) and not isinstance(value, bool) and value == 0)


def _covers(live: Any, want: Any) -> bool:
    if isinstance(want, dict):
        if not isinstance(live, dict):
            return False
        return all(_covers(live.get(k), v) if k in live else (is_empty(prune(v)) or _zero(v)) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(live, list) and len(live) == len(want) and all(map(_covers, live, want))
    return bool(live == want)


def covers(live: dict[str, Any] | None, desired: dict[str, Any]) -> bool:
    """True when ``live`` already holds every field of ``desired`` as Liqo would store it.

    Compared: the desired labels and annotations (others on the object are someone else's), and every
    other field but apiVersion, kind and status. Fields the desired object does not name are ignored,
    as server-side apply leaves them alone; lists compare whole, as CRDs store them atomically.
    """
    if live is None:
        return False
    meta, live_meta = desired.get("metadata") or {}, live.get("metadata") or {}
    # Common metadata dropped from the spec: the apply that removes it is due (liqo/common.py).
    if (live_meta.get("annotations") or {}).get(COMMON_METADATA) != (meta.get("annotations") or {}).get(
        COMMON_METADATA
    ):
        return False
    for field in ("labels", "annotations"):
        have = live_meta.get(field) or {}
        if any(have.get(k) != v for k, v in (meta.get(field) or {}).items()):
            return False
    body = {k: v for k, v in desired.items() if k not in ("apiVersion", "kind", "metadata", "status")}
    return _covers(live, body)


def overlay(live: dict[str, Any], wanted: dict[str, Any]) -> dict[str, Any]:
    """``live`` with ``wanted`` laid over it: maps merge at any depth, anything else in ``wanted`` replaces.

    What a server-side apply or a merge patch of ``wanted`` leaves behind, for a credential that may update
    but not patch (Liqo's peering-user): other managers' fields, and the live metadata such as
    resourceVersion, stay. A None removes the key, as in a merge patch.
    """
    out = dict(live)
    for key, value in wanted.items():
        old = out.get(key)
        if value is None:
            out.pop(key, None)
        else:
            out[key] = overlay(old, value) if isinstance(old, dict) and isinstance(value, dict) else value
    return out
