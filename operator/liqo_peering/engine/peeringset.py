"""SetService: one reconcile of one LiqoPeeringSet (read, plan, write its LiqoPeerings, the one status writer)
and one teardown pass; nothing else.

Synchronous, called from the set runner's threads, one call per set at a time. It keeps no state between
calls: what it needs is read again each pass, mostly from the watch hub's caches (the objects its
selector selects, the LiqoPeerings labelled with a set), so an operator restarted at any point resumes where the
last one stopped, without duplicates (children have fixed names; creating one twice is a 409).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

import structlog
from pydantic import ValidationError

from liqo_peering.api.peeringset import LiqoPeeringSetSpec, Source, parse_set_spec
from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.clients.events import EventRecorder
from liqo_peering.errors import (
    ApiError,
    ConsumerForbidden,
    InternalError,
    InvalidSpec,
    PeeringError,
    as_peering_error,
    own_cluster_unavailable,
)
from liqo_peering.fleet import children as ch
from liqo_peering.fleet import selector
from liqo_peering.fleet import status as fleet_status
from liqo_peering.liqo import naming
from liqo_peering.liqo import resources as r
from liqo_peering.metrics import Metrics
from liqo_peering.redact import redact
from liqo_peering.status.conditions import make_condition, set_condition

log = structlog.get_logger("liqo_peering.peeringset")
Obj = dict[str, Any]


# The kind each spec.source picks, and the chart value that lets the operator read it (None: always may).
SOURCES: Mapping[Source, tuple[r.Resource, str | None]] = MappingProxyType(
    {
        "Secret": (r.SECRET, None),
        "Cluster": (r.CAPI_CLUSTER, "clusterAPI.enabled"),
        "ClusterProfile": (r.CLUSTER_PROFILE, "clusterProfiles.enabled"),
    }
)


@dataclass(frozen=True)
class Selection:
    """What a set selects: a kind, and a labelSelector query in its namespace."""

    resource: r.Resource
    labels: str


@dataclass
class SetOutcome:
    gone: bool = False
    transient_error: bool = False
    selection: Selection | None = None  # what wakes it (None: its spec is unreadable)


class SetService:
    def __init__(
        self,
        local: ClusterClient,
        events: EventRecorder,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        metrics: Metrics | None = None,
    ) -> None:
        self.local = local
        self.events = events
        self.now = now
        self.metrics = metrics

    def reconcile(self, namespace: str, name: str) -> SetOutcome:
        body = self.local.get(r.LIQOPEERINGSET, name, namespace)
        if body is None or ch.deleting(body):
            return SetOutcome(gone=True)
        meta = body["metadata"]
        obs = fleet_status.SetObservation(generation=int(meta.get("generation") or 0), now=self.now())
        try:
            spec = parse_set_spec(body.get("spec") or {})
        except ValidationError as exc:
            obs = _failed(obs, namespace, name, InvalidSpec(f"invalid spec: {exc.errors()[0]['msg']}; fix the spec"))
            self._write_status(body, obs)
            return SetOutcome()
        selection = _selection(spec)
        obs = _with(obs, source=spec.source)
        try:
            picked = self._find_members(spec.source, selection, namespace)
            mine = self.local.find(r.LIQOPEERING, namespace, labels=f"{naming.SET_LABEL}={name}")
            template = (body.get("spec") or {}).get("template") or {}
            desired = ch.desired_children(name, template, spec.selector, picked, spec.source)
            plan = ch.plan(meta["uid"], name, desired, mine, spec.max_concurrent)
            obs = _with(obs, desired=desired, children={c["metadata"]["name"]: c for c in mine}, plan=plan)
            done, conflicts = self._apply(body, plan, obs.children)
            obs = _with(obs, done=done, conflicts={**plan.conflicts, **conflicts})
        except Exception as raised:  # a bug or an unexpected failure too: reported like any other error
            error = as_peering_error(raised, "the pass")
            if own_cluster_unavailable(error):
                raise  # the runner retries; the status stays as the last pass that could see it left it
            if isinstance(error, InternalError):
                log.error("pass failed", set=f"{namespace}/{name}", exc_info=raised)
            obs = _failed(obs, namespace, name, error)
        self._write_status(body, obs)
        return SetOutcome(transient_error=obs.error_reason is not None and obs.error_transient, selection=selection)

    def _find_members(self, source: Source, selection: Selection, namespace: str) -> list[Obj]:
        try:
            return self.local.find(selection.resource, namespace, labels=selection.labels)
        except ConsumerForbidden as exc:  # this cluster's RBAC: the chart grants it with a value
            value = SOURCES[source][1]
            if value is None:
                raise
            raise exc.restated(
                f"spec.source {source}: {exc.refused}; the operator may read them when its chart is installed"
                f" with {value}=true (helm upgrade --reuse-values --set {value}=true)"
            ) from None

    def report_failure(self, namespace: str, name: str, error: PeeringError) -> SetOutcome:
        """A pass failed where it could not say so itself (reading the set, writing its status): say it now.
        The LiqoPeerings' lines stay as the last pass wrote them; only the conditions change."""
        body = self.local.get(r.LIQOPEERINGSET, name, namespace)
        if body is None or ch.deleting(body):
            return SetOutcome(gone=True)
        meta = body["metadata"]
        obs = _failed(fleet_status.SetObservation(int(meta.get("generation") or 0), self.now()), namespace, name, error)
        old = dict(body.get("status") or {})
        new, events = fleet_status.compute(old, obs)
        patch = {"conditions": new["conditions"], "observedGeneration": new.get("observedGeneration")}
        if any(old.get(k) != v for k, v in patch.items()):
            self.local.merge_patch(r.LIQOPEERINGSET, name, namespace, {"status": patch}, subresource="status")
        for event in events:
            if event.type == "Warning":
                self.events.emit(body, event.type, event.reason, event.message)
                log.warning(redact(event.message), reason=event.reason, set=f"{namespace}/{name}")
        return SetOutcome(transient_error=True, selection=_query(body))

    def _apply(self, body: Obj, plan: ch.Plan, live: dict[str, Obj]) -> tuple[dict[str, ch.Why], dict[str, str]]:
        """The plan's writes; returns what was done and the names found taken (a 409 on create)."""
        namespace, uid = body["metadata"]["namespace"], body["metadata"]["uid"]
        done: dict[str, ch.Why] = {}
        conflicts: dict[str, str] = {}
        for action in plan.actions:
            try:
                if action.verb == "delete":
                    self.local.delete(r.LIQOPEERING, action.name, namespace)
                elif action.verb == "update" and action.desired is not None:
                    self.local.replace(r.LIQOPEERING, ch.child_object(body, action.desired, live[action.name]))
                elif action.desired is not None:
                    try:
                        self.local.create(r.LIQOPEERING, ch.child_object(body, action.desired), namespace)
                    except ApiError as exc:
                        if exc.status != 409:
                            raise
                        # Not labelled as the set's (so not in its cache): the set's own, relabel it; else taken.
                        found = self.local.get(r.LIQOPEERING, action.name, namespace) or {}
                        if not ch.owned_by_a_set(found, uid):
                            conflicts[action.name] = f"a LiqoPeering {action.name} the set does not own exists"
                            continue
                        self.local.replace(r.LIQOPEERING, ch.child_object(body, action.desired, found))
                        done[action.name] = "Adopted"
                        continue
                done[action.name] = action.why
            except ApiError as exc:
                if exc.status != 409:
                    raise
                # Changed meanwhile: its watch event wakes the set again, which plans from the new version.
                log.debug("LiqoPeering changed meanwhile; next pass", peering=action.name)
        return done, conflicts

    def _write_status(self, body: Obj, obs: fleet_status.SetObservation) -> None:
        old = dict(body.get("status") or {})
        new, events = fleet_status.compute(old, obs)
        meta = body["metadata"]
        if any(old.get(k) != v for k, v in new.items()):
            self.local.merge_patch(
                r.LIQOPEERINGSET, meta["name"], meta["namespace"], {"status": new}, subresource="status"
            )
        if self.metrics is not None:
            self.metrics.observe_set(meta, new)
        for event in events:
            self.events.emit(body, event.type, event.reason, event.message)
            level = log.warning if event.type == "Warning" else log.info
            level(redact(event.message), reason=event.reason, set=f"{meta['namespace']}/{meta['name']}")

    # -- teardown ---------------------------------------------------------------------------------
    def teardown(self, body: Obj) -> list[str]:
        """One pass of deleting the set; returns the LiqoPeerings it still waits for.

        Delete: its LiqoPeerings are deleted (each unpeers through its own finalizer) and waited for. Orphan:
        their owner reference to the set is removed first, so that the garbage collector leaves them.
        """
        meta = body["metadata"]
        namespace, uid = meta["namespace"], meta["uid"]
        orphan = (body.get("spec") or {}).get("deletionPolicy") == "Orphan"
        labelled = self.local.find(r.LIQOPEERING, namespace, labels=f"{naming.SET_LABEL}={meta['name']}")
        mine = [c for c in labelled if ch.owned_by_a_set(c, uid)]
        remaining = []
        for child in mine:
            cmeta = child["metadata"]
            try:
                if orphan:
                    refs = [ref for ref in cmeta.get("ownerReferences") or [] if ref.get("uid") != uid]
                    patch = {"metadata": {"ownerReferences": refs or None, "resourceVersion": cmeta["resourceVersion"]}}
                    self.local.merge_patch(r.LIQOPEERING, cmeta["name"], namespace, patch)
                    continue
                if not ch.deleting(child):
                    self.local.delete(r.LIQOPEERING, cmeta["name"], namespace)
            except ApiError as exc:
                if exc.status != 409:
                    raise
            remaining.append(cmeta["name"])
        if remaining:
            self._report_teardown(body, remaining, orphan)
        return remaining

    def _report_teardown(self, body: Obj, remaining: list[str], orphan: bool) -> None:
        meta = body["metadata"]
        shown = ", ".join(remaining[:5]) + (", ..." if len(remaining) > 5 else "")
        what = "to be released" if orphan else "to unpeer and go"
        message = f"deleting: waiting for {len(remaining)} LiqoPeerings {what}: {shown}"
        gen, now = int(meta.get("generation") or 0), self.now()
        conditions = (body.get("status") or {}).get("conditions")
        conditions = set_condition(conditions, make_condition("Ready", False, "Deleting", message, gen, now))
        conditions = set_condition(conditions, make_condition("Reconciling", True, "Deleting", message, gen, now))
        if conditions != (body.get("status") or {}).get("conditions"):
            patch = {"status": {"conditions": conditions}}
            self.local.merge_patch(r.LIQOPEERINGSET, meta["name"], meta["namespace"], patch, subresource="status")


def _failed(
    obs: fleet_status.SetObservation, namespace: str, name: str, exc: PeeringError
) -> fleet_status.SetObservation:
    message = f"LiqoPeeringSet {namespace}/{name}: {redact(exc.message)}"
    return _with(obs, error_reason=exc.reason, error_message=message, error_transient=exc.transient)


def _selection(spec: LiqoPeeringSetSpec) -> Selection:
    return Selection(SOURCES[spec.source][0], selector.as_query(spec.selector))


def _query(body: Obj) -> Selection | None:
    """What the set selects, None when its spec is unreadable (then none of it wakes the set)."""
    try:
        return _selection(parse_set_spec(body.get("spec") or {}))
    except ValidationError:
        return None


def _with(obs: fleet_status.SetObservation, **changes: Any) -> fleet_status.SetObservation:
    return dataclasses.replace(obs, **changes)
