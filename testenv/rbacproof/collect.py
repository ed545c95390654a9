"""The tier's part: per install of the chart, every request its ServiceAccount made (by the operator's user
agents), read from each cluster's audit log when the cluster is torn down."""

from __future__ import annotations

import json
import traceback
from dataclasses import astuple
from pathlib import Path
from typing import Any

from testenv import audit
from testenv.rbacproof import installs
from testenv.rbacproof.grants import service_account
from testenv.rbacproof.requests import OPERATOR_AGENTS, Request, scan

PARTS = Path(__file__).resolve().parents[2] / ".local" / "rbac"


class Part:
    """What one tier's clusters saw, saved after each cluster (a tier killed later keeps what it had)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.installs: list[dict[str, Any]] = []
        self.errors: list[str] = []

    def collect(self, workdir: Path, audit_log: Path) -> None:
        try:
            self._collect(workdir, audit_log)
        except Exception:  # the teardown goes on; the check fails on the error
            self.errors.append(f"{workdir}: {traceback.format_exc()}")
        self.save()

    def _collect(self, workdir: Path, audit_log: Path) -> None:
        noted = installs.noted_on(workdir)
        if not noted:
            return
        users = {i: service_account(installs.render(i.release, i.namespace, i.values)) for i in noted}
        seen, _ = scan(audit_log, {u for u in users.values() if u})
        requests: dict[installs.Install, set[Request]] = {i: set() for i in noted}
        after_uninstall: dict[installs.Install, int] = {i: 0 for i in noted}
        # 403s that say nothing about the chart's RBAC: refused by admission (RBAC allowed them), or by an API
        # server starting again, whose authorizer had not loaded the bindings yet.
        not_rbac: dict[installs.Install, int] = {i: 0 for i in noted}
        # A Pod's requests belong to the install it ran under: the latest before its first request. A Pod of
        # an uninstalled release still stopping when the next install begins is refused under that one's
        # name, but not under its RBAC.
        by_pod: dict[str, installs.Install] = {}
        for s in sorted(seen, key=lambda s: s.received):
            if not s.user_agent.startswith(OPERATOR_AGENTS):
                continue  # a test's own client with the ServiceAccount's token
            # The latest install of that ServiceAccount on this cluster before the request (or the Pod).
            owners = [i for i in noted if users[i] == s.username and i.at <= s.received]
            if not owners:
                continue
            latest = max(owners, key=lambda i: i.at)
            owner = by_pod.setdefault(s.pod, latest) if s.pod else latest
            if installs.uninstalled_between(owner, owner.at, s.received):
                after_uninstall[owner] += 1  # its Pod still stopping, its RBAC gone: not the chart's doing
            elif s.request.forbidden and (s.admission_refused or audit.restarting(workdir, s.received)):
                not_rbac[owner] += 1
            else:
                requests[owner].add(s.request)
        for install in noted:
            self.installs.append(
                {
                    **install.to_json(),
                    "cluster": workdir.name,
                    "serviceAccount": users[install],
                    "afterUninstall": after_uninstall[install],
                    "refusedNotByRbac": not_rbac[install],
                    "requests": [list(astuple(r)) for r in sorted(requests[install], key=_order)],
                }
            )

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps({"installs": self.installs, "errors": self.errors}, indent=1) + "\n")


def _order(request: Request) -> tuple[str, ...]:
    return tuple("" if v is None else str(v) for v in astuple(request))


def load(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    part = json.loads(path.read_text())
    return part["installs"], part["errors"]


def requests_of(install: dict[str, Any]) -> list[Request]:
    return [Request(*fields) for fields in install["requests"]]


_part: Part | None = None


def start(tier: str, parts: Path = PARTS) -> Part:
    """Collect for `tier` from now on (the pytest plugin, with --tier)."""
    global _part
    _part = Part(parts / f"{tier}.json")
    _part.save()  # a tier that installs nothing still says so
    return _part


def before_removal(workdir: Path, audit_log: Path) -> None:
    """testenv.audit's hook: a cluster's audit log, before its files go."""
    if _part is not None:
        _part.collect(workdir, audit_log)
