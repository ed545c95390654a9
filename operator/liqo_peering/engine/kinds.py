"""What a pass of each kind of object does in the runner (engine/runner.py), and what it keeps between passes.

LiqoPeerings: the last pass's outcome, which the ForeignCluster fast path re-mirrors onto and which a pass
woken only by Liqo's objects reuses the discovery of. A pass that failed leaves nothing to reuse, so the next
one starts from full discovery. LiqoPeeringSets keep nothing.
"""

from __future__ import annotations

import threading
from typing import Any

from liqo_peering.engine.peeringset import SetOutcome, SetService
from liqo_peering.engine.runner import ObjectKey
from liqo_peering.engine.service import Outcome, PeeringService
from liqo_peering.engine.watches import (
    HEALTH_CHANGED,
    KUBECONFIG,
    LIQO_IDENTITY,
    Route,
    peering_routes,
    set_routes,
    teardown_routes,
)
from liqo_peering.errors import InternalError, PeeringError
from liqo_peering.liqo import resources as r

FOREIGN_CLUSTER = "ForeignCluster"  # what the watch hub says when Liqo's ForeignCluster changed


class Peerings:
    kind = r.LIQOPEERING.kind
    debounce = 0.05  # Liqo updates several objects at once

    def __init__(self, service: PeeringService, resync_interval: float, namespaced_tenant_reads: bool = False) -> None:
        self.service = service
        self.resync_interval = resync_interval
        self.namespaced_tenant_reads = namespaced_tenant_reads
        self._guard = threading.Lock()
        self._last: dict[ObjectKey, Outcome] = {}

    def reconcile(self, key: ObjectKey, woken_by: frozenset[str]) -> Outcome:
        """The ForeignCluster fast path when only it changed, else a reconcile; one woken by Liqo's objects
        only reuses the last pass's discovery. A timer (resync, timeout), a spec change or the kubeconfig
        Secret discovers again; a relist alone does not: discovery reads nothing the informers hold but
        that Secret."""
        with self._guard:
            last = self._last.get(key)
        if last is not None and last.error is not None and last.error.reason == InternalError.reason:
            last = None  # a failed pass leaves nothing to build on: no fast path, no reused discovery
        outcome = None
        if last is not None and woken_by == {FOREIGN_CLUSTER}:
            outcome = self.service.refresh_mirror(key.namespace, key.name, last)
        if outcome is None:
            rediscover = {"spec", KUBECONFIG, LIQO_IDENTITY}  # what a pass must discover again after
            full = not woken_by or bool(woken_by & rediscover) or last is None or last.transient_error
            outcome = self.service.reconcile(key.namespace, key.name, None if full else last)
        with self._guard:
            if outcome.gone:
                self._last.pop(key, None)
            else:
                self._last[key] = outcome
        return outcome

    def report(self, key: ObjectKey, error: PeeringError) -> Outcome:
        with self._guard:
            self._last.pop(key, None)  # nothing of a failed pass is reused
        return self.service.report_failure(key.namespace, key.name, error)

    def routes(self, key: ObjectKey, outcome: Outcome) -> list[Route]:
        if outcome.secret is None:
            return []
        return peering_routes(
            self.service.local,
            outcome.remote,
            outcome.ctx,
            outcome.secret,
            self.namespaced_tenant_reads,
            outcome.minted_secret,
            mints=outcome.mints,
            reverse=outcome.reverse,
            liqo_namespaces=outcome.liqo_namespaces,
            gateway_location=outcome.gateway_location,
        )

    def delay(self, outcome: Outcome, failures: int) -> float:
        """The requeue the pass asked for, backed off exponentially while errors persist."""
        if outcome.requeue_after is None:
            return self.resync_interval
        backoff = 2 ** max(failures - 1, 0) if failures else 1
        return min(outcome.requeue_after * backoff, self.resync_interval)

    def restart_backoff(self, woken_by: frozenset[str]) -> bool:
        return HEALTH_CHANGED in woken_by

    def teardown(self, body: dict[str, Any]) -> list[str]:
        return self.service.teardown(body)

    def teardown_routes(self, key: ObjectKey) -> list[Route]:
        found = self.service.unpeering(key.namespace, key.name)
        if found is None:
            return []
        return teardown_routes(
            self.service.local,
            found.remote,
            found.ctx,
            reverse=found.reverse,
            namespaces=found.namespaces,
            gateway_location=found.gateway_location,
        )

    def forget(self, key: ObjectKey) -> None:
        self.service.release(key.namespace, key.name)
        with self._guard:
            self._last.pop(key, None)


class PeeringSets:
    kind = r.LIQOPEERINGSET.kind
    debounce = 0.2  # a set's LiqoPeerings change status in bursts (one per stage each)

    def __init__(self, service: SetService, resync_interval: float) -> None:
        self.service = service
        self.resync_interval = resync_interval

    def reconcile(self, key: ObjectKey, woken_by: frozenset[str]) -> SetOutcome:
        return self.service.reconcile(key.namespace, key.name)

    def report(self, key: ObjectKey, error: PeeringError) -> SetOutcome:
        return self.service.report_failure(key.namespace, key.name, error)

    def routes(self, key: ObjectKey, outcome: SetOutcome) -> list[Route]:
        return set_routes(self.service.local, key.namespace, key.name, outcome.secrets)

    def delay(self, outcome: SetOutcome, failures: int) -> float:
        return min(2.0**failures, self.resync_interval) if failures else self.resync_interval

    def restart_backoff(self, woken_by: frozenset[str]) -> bool:
        return False

    def teardown(self, body: dict[str, Any]) -> list[str]:
        return self.service.teardown(body)

    def teardown_routes(self, key: ObjectKey) -> list[Route]:
        """Its LiqoPeerings' deletion."""
        return set_routes(self.service.local, key.namespace, key.name)

    def forget(self, key: ObjectKey) -> None:
        """A set keeps nothing between passes."""
