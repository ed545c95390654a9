"""How much of an API server's answer the client reads, and what shape it must have.

An answer is read in chunks up to a byte cap, then parsed; whatever lies beyond a bound fails that request
with a BadAnswer (errors.py) and never the operator: a cluster's API server, or whatever answers at its
address, is another trust domain.

The caps:

- one object: 4 MiB. etcd stores at most 1.5 MiB per value (its default --max-request-bytes), and the API
  server takes request bodies up to 3 MiB; an object's JSON (managedFields included) is larger than etcd's
  protobuf of it, so 4 MiB holds any object an API server can store, with room;
- a list, or a path outside any resource (/version, /openapi/v3/...): 64 MiB. The operator lists with label
  and field selectors, so its lists hold a few objects of one peering, not a cluster's worth;
- an error answer: 64 KiB, of which the message keeps 1024 characters (a Status object is small);
- one watch event: one object and its envelope, so the object's cap;
- JSON values: 500000 per answer, counted before parsing (each value but the first follows a ``,``, a
  ``:`` or a ``[``). Parsed, a value costs from 8 bytes (a small number in a list) to a few hundred (an
  object), so 64 MiB of tiny values would take gigabytes; 500000 take at most about 100 MiB, while a Liqo
  object holds a few hundred values and the operator's lists a few objects;
- JSON nesting: 200 levels. Kubernetes objects nest a few dozen levels at most (an OpenAPI schema ~50);
  the client's copies (copy.deepcopy) recurse per level, and must stay far from Python's recursion limit.
"""

from __future__ import annotations

import json
from typing import Any

from liqo_peering.errors import AnswerInvalid, AnswerTooLarge, Request

MiB = 1 << 20
MAX_OBJECT_BYTES = 4 * MiB
MAX_LIST_BYTES = 64 * MiB
MAX_ERROR_BYTES = 64 << 10
MAX_MESSAGE_CHARS = 1024
MAX_EVENT_BYTES = MAX_OBJECT_BYTES + (64 << 10)
MAX_DEPTH = 200
MAX_VALUES = 500_000
CHUNK = 64 << 10


def size(limit: int) -> str:
    return f"{limit // MiB} MiB" if limit >= MiB else f"{limit >> 10} KiB"


def read_capped(raw: Any, limit: int) -> tuple[bytearray, bool]:
    """Read a urllib3 response's body (decoded) up to ``limit`` bytes: at most those, and whether it holds
    more. The caller then discards the connection (``discard``): the rest is never read. A bytearray, never
    copied: a list's cap is large enough that each copy would count."""
    body = bytearray()
    while len(body) <= limit:
        chunk = raw.read(min(CHUNK, limit + 1 - len(body)), decode_content=True)
        if not chunk:
            return body, False
        body += chunk
    del body[limit:]
    return body, True


def discard(raw: Any) -> None:
    """Close a response whose body is left unread: its connection must not go back to the pool as it is."""
    try:
        raw.close()
    finally:
        raw.release_conn()


def parse(data: bytes | bytearray, side: str, request: Request) -> Any:
    """JSON of at most MAX_VALUES values (AnswerTooLarge), nested at most MAX_DEPTH deep (AnswerInvalid)."""
    values = data.count(b",") + data.count(b":") + data.count(b"[") + 1  # at least as many as it holds
    if values > MAX_VALUES:
        raise AnswerTooLarge(side, request, "an answer of too many JSON values", f"{MAX_VALUES} values")
    try:
        found = json.loads(data)
    except RecursionError:
        raise AnswerInvalid(side, request, "JSON nested too deep", f"{MAX_DEPTH} levels") from None
    except ValueError as exc:  # UnicodeDecodeError and int conversion limits too
        raise AnswerInvalid(side, request, f"not JSON ({type(exc).__name__} at {_where(exc)})") from None
    if too_deep(found, MAX_DEPTH):
        raise AnswerInvalid(side, request, "JSON nested too deep", f"{MAX_DEPTH} levels")
    return found


def _where(exc: ValueError) -> str:
    pos = getattr(exc, "pos", None)
    return f"byte {pos}" if isinstance(pos, int) else "its start"


def too_deep(found: Any, limit: int) -> bool:
    """Whether ``found`` nests more than ``limit`` containers deep (iterative: no recursion to exhaust)."""
    stack: list[tuple[Any, int]] = [(found, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def a_json_object(found: Any, side: str, request: Request) -> dict[str, Any]:
    if not isinstance(found, dict):
        raise AnswerInvalid(side, request, f"a JSON {_kind(found)} where an object was expected")
    return found


def an_object(found: Any, side: str, request: Request) -> dict[str, Any]:
    """A Kubernetes object: a JSON object whose metadata is one, with a name."""
    a_json_object(found, side, request)
    meta = found.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
        raise AnswerInvalid(side, request, "an object without metadata.name")
    return found


def a_list(found: Any, side: str, request: Request) -> tuple[list[dict[str, Any]], str]:
    """A list's items, each an object, and its resourceVersion."""
    if not isinstance(found, dict):
        raise AnswerInvalid(side, request, f"a JSON {_kind(found)} where a list was expected")
    items = found.get("items") or []
    meta = found.get("metadata") or {}
    if not isinstance(items, list) or not isinstance(meta, dict):
        raise AnswerInvalid(side, request, "a list whose items or metadata are of the wrong type")
    for item in items:
        an_object(item, side, request)
    return items, str(meta.get("resourceVersion") or "")


def an_event(found: Any, side: str, request: Request) -> dict[str, Any]:
    """A watch event: its type, and an object (a Status for an ERROR)."""
    kind = found.get("type") if isinstance(found, dict) else None
    if not isinstance(kind, str) or not isinstance(found.get("object"), dict):
        raise AnswerInvalid(side, request, "a watch event without a type and an object")
    if found["type"] in ("ADDED", "MODIFIED", "DELETED"):
        an_object(found["object"], side, request)
    elif found["type"] == "BOOKMARK" and not isinstance(found["object"].get("metadata"), dict):
        raise AnswerInvalid(side, request, "a bookmark without metadata")
    return found


def too_large(side: str, request: Request, limit: int, what: str = "an answer") -> AnswerTooLarge:
    return AnswerTooLarge(side, request, f"{what} over the limit", size(limit))


def _kind(found: Any) -> str:
    return {list: "array", str: "string", bool: "boolean", type(None): "null"}.get(type(found), "number")
