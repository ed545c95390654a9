"""Read fields of objects another program wrote (Liqo's, mostly), whatever their types.

The API server guarantees an object's ``metadata`` (a name, string labels and annotations) and, for a custom
resource, only what its CRD's schema says, which changes with the writer's version. So a reader takes every
other field as it comes: a mapping where a mapping was expected, else nothing. These helpers return a safe
empty value for a missing or wrongly typed field, so readers need no isinstance checks of their own.
"""

from __future__ import annotations

from typing import Any


def mapping(value: Any) -> dict[str, Any]:
    """``value`` if it is a mapping, else an empty one."""
    return value if isinstance(value, dict) else {}


def dig(obj: Any, *keys: str) -> Any:
    """The value at ``keys`` under ``obj``, through mappings only; None when a step is missing or not one."""
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def mapping_at(obj: Any, *keys: str) -> dict[str, Any]:
    """The mapping at ``keys``, or an empty one."""
    return mapping(dig(obj, *keys))


def mappings_at(obj: Any, *keys: str) -> list[dict[str, Any]]:
    """The mappings in the list at ``keys`` (a condition list, say); other items, or no list, are left out."""
    value = dig(obj, *keys)
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def text_at(obj: Any, *keys: str) -> str | None:
    """The non-empty string at ``keys``, or None."""
    value = dig(obj, *keys)
    return value if isinstance(value, str) and value else None


def strings(value: Any) -> list[str]:
    """The non-empty strings of a list, or a one-string list: a field that was a string in older versions."""
    items = value if isinstance(value, list) else [value]
    return [v for v in items if isinstance(v, str) and v]


# A gateway endpoint holds at most this many ports (Liqo's CRD after v1.2.0: MaxItems=64).
MAX_PORTS = 64


def _port(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 65535


def _listed_ports(endpoint: dict[str, Any]) -> list[Any] | None:
    listed = endpoint.get("ports")
    return listed if isinstance(listed, list) and listed else None


def lists_ports(endpoint: Any) -> bool:
    """Whether a Liqo gateway endpoint is in the list form (``ports``, after v1.2.0)."""
    endpoint = mapping(endpoint)
    return _listed_ports(endpoint) is not None and "port" not in endpoint


def endpoint_ports(endpoint: Any) -> list[int]:
    """The ports of a Liqo gateway endpoint, in either of its forms: ``port`` (every release), or ``ports`` (after
    v1.2.0, one per WireGuard interface; ``port`` is then deprecated and the two are mutually exclusive)."""
    endpoint = mapping(endpoint)
    listed = _listed_ports(endpoint)
    if listed is not None:
        return [p for p in listed[:MAX_PORTS] if _port(p)]
    return [endpoint["port"]] if _port(endpoint.get("port")) else []
