"""Requests as the audit log records them, reduced to what RBAC authorizes: verb, group, resource,
subresource, namespace and name, with the response code."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

# The operator's own clients and kopf's, and the access provider plugin it runs as itself (the upstream
# secretreader, built as secretreader-plugin: client-go names it by its binary): a test's client using the
# ServiceAccount's token is none of them.
OPERATOR_AGENTS = ("liqo-peering-operator/", "kopf/", "secretreader-plugin/")
# The audit annotations of the authorizer's decision, and of a ValidatingAdmissionPolicy's refusal.
DECISION = "authorization.k8s.io/decision"
POLICY_ANNOTATIONS = "validation.policy.admission.k8s.io/"


@dataclass(frozen=True, order=True)
class Request:
    verb: str
    api_group: str
    resource: str  # "" for a non-resource URL (its path is then `name`)
    subresource: str | None
    namespace: str | None
    name: str | None
    code: int | None

    @property
    def forbidden(self) -> bool:
        return self.code == 403

    def authorized_as(self) -> list[tuple[str, str | None]]:
        """The (verb, name) pairs the API server authorized for it, as RBAC's resourceNames see them."""
        if self.code in (401, 403):
            return []
        # A create is authorized before its object has a name (the log has it from the request body).
        pairs: list[tuple[str, str | None]] = [(self.verb, None if self.verb == "create" else self.name)]
        if self.verb == "patch" and self.code == 201:
            # A server-side apply that created its object: also authorized as `create` of that name.
            pairs.append(("create", self.name))
        return pairs

    def describe(self) -> str:
        if not self.resource:
            return f"{self.verb} {self.name}"
        what = f"{self.api_group or 'core'}/{self.resource}" + (f"/{self.subresource}" if self.subresource else "")
        where = f" in {self.namespace}" if self.namespace else ""
        named = f" {self.name}" if self.name else ""
        return f"{self.verb} {what}{named}{where} ({self.code})"


@dataclass(frozen=True)
class Seen:
    """A request of one user, when it was received."""

    username: str
    user_agent: str
    received: datetime
    request: Request
    pod: str = ""  # the Pod whose bound token made it ("" when not a Pod's)
    # Refused (403) although RBAC allowed it: by admission, such as an Event in a namespace being deleted. A
    # ValidatingAdmissionPolicy's refusal (the chart's own policies) does not count: that one is the chart's.
    admission_refused: bool = False


def parse(line: str) -> Seen | None:
    """A completed request, or a watch as it starts (its end may never be logged); None for other lines."""
    raw = json.loads(line)
    stage = raw.get("stage")
    if stage != "ResponseComplete" and not (stage == "ResponseStarted" and raw.get("verb") == "watch"):
        return None
    ref = raw.get("objectRef") or {}
    request = Request(
        verb=raw["verb"],
        api_group=ref.get("apiGroup", ""),
        resource=ref.get("resource", ""),
        subresource=ref.get("subresource"),
        namespace=ref.get("namespace"),
        name=ref.get("name") if ref else raw.get("requestURI", "").split("?")[0],
        code=(raw.get("responseStatus") or {}).get("code"),
    )
    user = raw.get("user") or {}
    pods = (user.get("extra") or {}).get("authentication.kubernetes.io/pod-name") or [""]
    notes = raw.get("annotations") or {}
    by_policy = any(key.startswith(POLICY_ANNOTATIONS) for key in notes)
    return Seen(
        username=user.get("username", ""),
        user_agent=raw.get("userAgent", ""),
        received=datetime.fromisoformat(raw["requestReceivedTimestamp"]),
        request=request,
        pod=pods[0],
        admission_refused=request.forbidden and notes.get(DECISION) == "allow" and not by_policy,
    )


def scan(path: Path, usernames: set[str], offset: int = 0) -> tuple[list[Seen], int]:
    """The requests of `usernames` in the log from byte `offset` on, and the offset after its last complete
    line. Lines are matched as bytes first, so the rest of a large log is not parsed."""
    needles = [json.dumps(u).encode() for u in usernames]
    found: list[Seen] = []
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return [], offset
    with handle:
        handle.seek(offset)
        for line in handle:
            if not line.endswith(b"\n"):
                break  # the API server is writing it
            offset += len(line)
            if any(n in line for n in needles):
                seen = parse(line.decode())
                if seen is not None and seen.username in usernames:
                    found.append(seen)
    return found, offset
