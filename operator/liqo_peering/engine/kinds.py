"""What a pass of each kind of object does in the runner (engine/runner.py), and what it keeps between passes.

LiqoPeerings: the last pass's outcome, which the ForeignCluster fast path re-mirrors onto and which a pass
woken only by Liqo's objects reuses the discovery of. A pass that failed leaves nothing to reuse, so the next
one starts from full discovery. Their teardown passes are engine/unpeering.py's, which keeps what the earlier
ones of the same unpeering found; the kind adds what follows the last one (the Secret's release, the metrics
forgotten, the Unpeered Event). LiqoPeeringSets keep nothing.
"""

from __future__ import annotations

import threading
from typing import Any

from liqo_peering.engine.peeringset import SetOutcome, SetService
from liqo_peering.engine.reconcile import Outcome, Reconciler, Routed
from liqo_peering.engine.runner import ObjectKey
from liqo_peering.engine.statuswriter import STATUS_DUE
from liqo_peering.engine.unpeering import Teardown, Unpeerer
from liqo_peering.engine.watches import (
    HEALTH_CHANGED,
    Route,
    WatchHub,
    peering_routes,
    set_routes,
)
from liqo_peering.errors import InternalError, PeeringError
from liqo_peering.liqo import resources as r
from liqo_peering.redact import redact

FOREIGN_CLUSTER = "ForeignCluster"  # what the watch hub says when Liqo's ForeignCluster changed


class Peerings:
    kind = r.LIQOPEERING.kind
    # Liqo updates several objects at once: one pass for those. Short, as a pass woken again while it runs
    # leaves its status to the next one (statuswriter.py): extra passes read informers, and write little.
    debounce = 0.02

    def __init__(
        self,
        reconciler: Reconciler,
        unpeerer: Unpeerer,
        resync_interval: float,
        namespaced_tenant_reads: bool = False,
        hub: WatchHub | None = None,
    ) -> None:
        """``hub``: told a pass's routes as soon as its context is known (the runner tells it again after the
        pass)."""
        self.reconciler = reconciler
        self.hub = hub
        self.unpeerer = unpeerer
        self.resync_interval = resync_interval
        self.namespaced_tenant_reads = namespaced_tenant_reads
        self._guard = threading.Lock()
        self._last: dict[ObjectKey, Outcome] = {}

    def reconcile(self, key: ObjectKey, woken_by: frozenset[str]) -> Outcome:
        """The ForeignCluster fast path when only it changed or a held status is due, else a reconcile; one
        woken by Liqo's objects only reuses the last pass's discovery. A timer (resync, timeout) or a spec
        change discovers again; a relist alone does not. Woken by the kubeconfig Secret or Liqo's cluster-ID
        ConfigMaps, the reconciler reuses the discovery only if the kubeconfig is the one it was made with
        (the same provider client) and both ConfigMaps are as it read them: the operator's own finalizer on
        the Secret, or an informer's first list of what the pass just read, changes nothing that discovery
        found."""
        with self._guard:
            last = self._last.get(key)
        if last is not None and last.error is not None and last.error.reason == InternalError.reason:
            last = None  # a failed pass leaves nothing to build on: no fast path, no reused discovery
        outcome = None
        if last is not None and woken_by and woken_by <= {FOREIGN_CLUSTER, STATUS_DUE}:
            outcome = self.reconciler.refresh_mirror(key.namespace, key.name, last)
        if outcome is None:
            rediscover = {"spec"}  # what a pass must discover again after
            full = not woken_by or bool(woken_by & rediscover) or last is None or last.transient_error
            outcome = self.reconciler.reconcile(key.namespace, key.name, None if full else last, self._routed(key))
        with self._guard:
            if outcome.gone:
                self._last.pop(key, None)
            else:
                self._last[key] = outcome
        return outcome

    def _routed(self, key: ObjectKey) -> Routed | None:
        hub = self.hub
        if hub is None:
            return None
        return lambda outcome: hub.set_routes(key, self.routes(key, outcome))

    def report(self, key: ObjectKey, error: PeeringError) -> Outcome:
        with self._guard:
            self._last.pop(key, None)  # nothing of a failed pass is reused
        return self.reconciler.report_failure(key.namespace, key.name, error)

    def routes(self, key: ObjectKey, outcome: Outcome) -> list[Route]:
        if outcome.secret is None and outcome.profile is None and not outcome.cloud:
            return []  # its spec could not be read: nothing of it to watch
        return peering_routes(
            self.reconciler.local,
            outcome.remote,
            outcome.ctx,
            outcome.secret,
            self.namespaced_tenant_reads,
            outcome.minted_secret,
            mints=outcome.mints,
            reverse=outcome.reverse,
            liqo_namespaces=outcome.liqo_namespaces,
            gateway_location=outcome.gateway_location,
            profile=outcome.profile,
            restarts=self.reconciler.restart_liqo,
        )

    def delay(self, outcome: Outcome, failures: int) -> float:
        """The requeue the pass asked for, backed off exponentially while errors persist."""
        if outcome.requeue_after is None:
            return self.resync_interval
        backoff = 2 ** max(failures - 1, 0) if failures else 1
        return min(outcome.requeue_after * backoff, self.resync_interval)

    def restart_backoff(self, woken_by: frozenset[str]) -> bool:
        return HEALTH_CHANGED in woken_by

    def teardown(self, key: ObjectKey, body: dict[str, Any]) -> Teardown:
        self.unpeerer.deleting(body)
        outcome = self.unpeerer.unpeer(body)
        if not outcome.remaining:
            self.unpeerer.finished(body)
        return outcome

    def report_teardown(self, key: ObjectKey, body: dict[str, Any], error: PeeringError) -> Teardown:
        return self.unpeerer.report(body, error)

    def forget(self, key: ObjectKey) -> None:
        self.reconciler.forget(key.namespace, key.name)
        self.unpeerer.forget(key.namespace, key.name)
        with self._guard:
            self._last.pop(key, None)

    def secret_switched(self, namespace: str, old: str | None) -> None:
        """The peering uses another Secret now: the old one's protection goes unless another one uses it."""
        self.unpeerer.release_secret(namespace, old)


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
        selection = outcome.selection
        members = None if selection is None else (selection.resource, selection.labels)
        return set_routes(self.service.local, key.namespace, key.name, members)

    def delay(self, outcome: SetOutcome, failures: int) -> float:
        return min(2.0**failures, self.resync_interval) if failures else self.resync_interval

    def restart_backoff(self, woken_by: frozenset[str]) -> bool:
        return False

    def teardown(self, key: ObjectKey, body: dict[str, Any]) -> Teardown:
        """What its LiqoPeerings' deletion leaves; their deletion wakes the next pass."""
        remaining = self.service.teardown(body)
        if not remaining and self.service.metrics is not None:
            self.service.metrics.forget_set(key.namespace, key.name)
        return Teardown(tuple(remaining), tuple(set_routes(self.service.local, key.namespace, key.name)))

    def report_teardown(self, key: ObjectKey, body: dict[str, Any], error: PeeringError) -> Teardown:
        return Teardown(failure=f"cannot delete: {redact(error.message)}")

    def forget(self, key: ObjectKey) -> None:
        """A set keeps nothing between passes."""
