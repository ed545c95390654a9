"""Reading an API server's error answer into an ApiError: what was asked, and what the Status object says.

A 403 is read before it is named: the authorizer (RBAC), a ResourceQuota, an admission webhook or policy and
a namespace being deleted all answer 403, and each needs a different fix. Webhooks and policies may also
deny with 400 or 422. The Status's message is the only place some of them say who they are (the API server
words them so: ``admission webhook "x" denied the request: ...``), so this is the one place that reads it.

An answer is another cluster's text: only its first bytes are parsed (bounds.MAX_ERROR_BYTES), and only the
first characters of its message and reason are kept (bounds.MAX_MESSAGE_CHARS), before they are redacted.
"""

from __future__ import annotations

import json
import re
from types import MappingProxyType
from typing import Any

from liqo_peering.clients.bounds import MAX_ERROR_BYTES, MAX_MESSAGE_CHARS
from liqo_peering.errors import (
    AdmissionDenied,
    ApiError,
    ClusterForbidden,
    NamespaceTerminating,
    QuotaExceeded,
    Request,
    Unauthorized,
)
from liqo_peering.redact import redact

_VERBS = MappingProxyType({"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"})

# The authorizer's refusal (k8s.io/apiserver endpoints/handlers/responsewriters: forbiddenMessage).
_AUTHORIZER = re.compile(r'\bUser "[^"]*" cannot \S+')
# Admission webhooks (k8s.io/apiserver admission/plugin/webhook/errors: ToStatusErr) and admission policies.
_WEBHOOK = re.compile(r'admission webhook "([^"]+)" denied the request')
_POLICY = re.compile(
    r"\b((?:Validating|Mutating)AdmissionPolicy|policy) (?:'([^']+)'|\"([^\"]+)\")(?: with binding '([^']+)')?"
    r" denied request"
)
# The ResourceQuota admission plugin (k8s.io/apiserver admission/plugin/resourcequota): a full quota, one
# that needs a field the object lacks, one whose usage its controller has not counted yet.
_QUOTA = re.compile(r"\b(?:exceeded quota|failed quota|status unknown for quota): ([^,:]+)")
_LIMITED = re.compile(r", limited: (.*)$")
# Any other admission plugin refusing an object: "<resource> "<name>" is forbidden: <why>".
_PLUGIN = re.compile(r'"[^"]*" is forbidden: (?!User ")')

NAMESPACE_TERMINATING = "NamespaceTerminating"  # the StatusCause the NamespaceLifecycle plugin adds


def request_of(server: str, method: str, path: str, created: str | None = None) -> Request:
    """The request as RBAC names it. ``method`` WATCH is a watch; a GET is a get when the path names an
    object, else a list. ``created``: the name of the object a POST sends (its path names none)."""
    parts = [p for p in path.split("?")[0].split("/") if p]
    # /api/v1/... or /apis/<group>/<version>/...
    group = parts[1] if parts[:1] == ["apis"] and len(parts) > 2 else ""
    rest = parts[3:] if group else parts[2:]
    namespace = None
    if len(rest) > 2 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    plural = rest[0] if rest else "?"
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    verb = "watch" if method == "WATCH" else _VERBS.get(method, "get" if name else "list")
    name = name or created
    resource = plural + (f"/{sub}" if sub else "")
    return Request(server=server, verb=verb, group=group, resource=resource, namespace=namespace, name=name)


def status_of(text: str) -> dict[str, Any]:
    """The Status object of an error answer; empty when the body is none (a proxy's plain text)."""
    try:
        answer = json.loads(text[:MAX_ERROR_BYTES] or "{}")
    except (ValueError, RecursionError):
        return {}
    return answer if isinstance(answer, dict) else {}


def read(side: str, request: Request, status: int, http_reason: str | None, text: str) -> ApiError:
    """The error an answer is: Unauthorized, ClusterForbidden (RBAC), QuotaExceeded, AdmissionDenied,
    NamespaceTerminating, or any other ApiError."""
    body = status_of(text)
    message = redact(str(body.get("message") or "")[:MAX_MESSAGE_CHARS])
    fields: dict[str, Any] = {
        "status": status,
        "side": side,
        "request": request,
        "server_reason": redact(str(body.get("reason") or http_reason or "")[:200]),
        "server_message": message,
        "body": body,
    }
    if status == 401:
        return Unauthorized(**fields)
    admission = _admission(message)
    if admission is not None:
        return AdmissionDenied(admission=admission, **fields)
    if status != 403:
        return ApiError(**fields)
    if NAMESPACE_TERMINATING in _causes(body):
        return NamespaceTerminating(**fields)
    quota = _QUOTA.search(message)
    if quota is not None:
        limited = _LIMITED.search(message)
        return QuotaExceeded(quota=quota.group(1).strip(), limited=limited.group(1) if limited else "", **fields)
    if _PLUGIN.search(message) and not _AUTHORIZER.search(message):
        return AdmissionDenied(admission="an admission plugin", **fields)
    return ClusterForbidden(**fields)


def _admission(message: str) -> str | None:
    """Who denied it, when a webhook or an admission policy did: ``admission webhook "x"``,
    ``ValidatingAdmissionPolicy "p" (binding "b")``."""
    webhook = _WEBHOOK.search(message)
    if webhook is not None:
        return f'admission webhook "{webhook.group(1)}"'
    policy = _POLICY.search(message)
    if policy is not None:
        kind, quoted, double_quoted, binding = policy.groups()
        kind = "admission policy" if kind == "policy" else kind
        return f'{kind} "{quoted or double_quoted}"' + (f' (binding "{binding}")' if binding else "")
    return None


def _causes(body: dict[str, Any]) -> set[str]:
    details = body.get("details")
    causes = details.get("causes") if isinstance(details, dict) else None
    return {str(c.get("reason")) for c in causes or [] if isinstance(c, dict)}
