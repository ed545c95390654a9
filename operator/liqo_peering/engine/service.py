"""PeeringService: one reconcile of one LiqoPeering, from reading it to writing its status.

Handlers call ``reconcile`` and ``teardown``; everything here is synchronous (run in a worker thread)
and derives its state from the clusters, so an operator restarted at any point continues where the
last one stopped.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import structlog
from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError

from liqo_peering import logs
from liqo_peering.api.model import LiqoPeeringSpec, parse_spec
from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.clients.events import EventRecorder
from liqo_peering.engine import authentication, discovery, networking, offloading, teardown
from liqo_peering.engine.discovery import KubeconfigPolicy, TenantAccess
from liqo_peering.engine.result import STAGES, StageResult
from liqo_peering.engine.run import PeeringRun
from liqo_peering.errors import DuplicatePeering, PeeringError
from liqo_peering.kubeconfig import KubeconfigError, redact
from liqo_peering.liqo import naming
from liqo_peering.liqo import resources as r
from liqo_peering.liqo.context import PeeringContext
from liqo_peering.metrics import Metrics
from liqo_peering.status import compute as status_compute
from liqo_peering.status.foreigncluster import mirror_foreign_cluster

log = structlog.get_logger("liqo_peering")
TRANSIENT_RETRY_SECONDS = 5.0


@dataclass
class Outcome:
    """What the caller needs after a reconcile: when to look again and what to watch."""

    requeue_after: float | None = None
    transient_error: bool = False  # the runner backs off exponentially while this stays true
    remote: ClusterClient | None = None
    watch_local: list[tuple[r.Resource, str | None, str | None]] = field(default_factory=list)
    watch_remote: list[tuple[r.Resource, str | None, str | None]] = field(default_factory=list)
    gone: bool = False


def _api_error(exc: ApiException, side: str) -> PeeringError:
    try:
        detail = json.loads(exc.body or "{}").get("message") or exc.reason
    except ValueError:
        detail = exc.reason
    return PeeringError(f"the {side} cluster answered {exc.status}: {redact(str(detail))}", reason="ApiError")


class PeeringService:
    def __init__(
        self,
        local: ClusterClient,
        events: EventRecorder,
        metrics: Metrics,
        policy: KubeconfigPolicy,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        tenant_access: TenantAccess | None = None,
    ) -> None:
        self.local = local
        self.events = events
        self.metrics = metrics
        self.policy = policy
        self.tenant_access = tenant_access
        self.now = now
        self._remotes: dict[str, ClusterClient] = {}
        self._lock = threading.Lock()
        # Per peering: one of reconcile / refresh_mirror / teardown at a time (see _serialized).
        self._peering_locks: dict[tuple[str, str], threading.Lock] = {}
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="stage")
        # The last reconcile's observations per peering, for the ForeignCluster fast path.
        self._last: dict[tuple[str, str], tuple[status_compute.Observation, Outcome, PeeringError | None]] = {}

    # -- helpers ---------------------------------------------------------------------------------
    def _remote_client(self, namespace: str, name: str, spec: LiqoPeeringSpec) -> ClusterClient:
        kubeconfig = discovery.read_remote_kubeconfig(self.local, namespace, name, spec, self.policy)
        key = hashlib.sha256(json.dumps(kubeconfig.config, sort_keys=True, default=str).encode()).hexdigest()
        with self._lock:
            client = self._remotes.get(key)
            if client is None:
                client = discovery.connect_remote(kubeconfig)
                self._remotes[key] = client
            return client

    def _check_duplicate(self, namespace: str, name: str, created: str, remote_id: str) -> None:
        mine = (created, namespace, name)
        for other in self.local.find(r.LIQOPEERING):
            meta = other["metadata"]
            if (meta["namespace"], meta["name"]) == (namespace, name):
                continue
            if (other.get("status") or {}).get("remoteClusterID") != remote_id:
                continue
            if (meta.get("creationTimestamp", ""), meta["namespace"], meta["name"]) < mine:
                raise DuplicatePeering(
                    f"LiqoPeering {meta['namespace']}/{meta['name']} already peers with provider {remote_id};"
                    f" delete one of the two (this one, {namespace}/{name}, does nothing meanwhile)"
                )

    def _context(self, run_ns: str, run_name: str, spec: LiqoPeeringSpec, remote: ClusterClient) -> PeeringContext:
        consumer = discovery.cluster_info(self.local, spec.liqo_namespace)
        provider = discovery.cluster_info(remote, spec.remote_liqo_namespace)
        return PeeringContext(run_ns, run_name, consumer, provider)

    def _serialized(self, namespace: str, name: str) -> threading.Lock:
        """The lock that keeps a peering's reconcile, mirror refresh and teardown from overlapping.

        The daemon runs reconcile in a worker thread, and kopf cancelling the daemon on deletion does not
        stop that thread: a reconcile already past its deletionTimestamp check would re-apply objects
        (seen: the ResourceSlice) while, or after, teardown deletes them, and they stayed orphaned once
        the LiqoPeering was gone. With the lock, teardown waits for that reconcile and then removes
        everything it applied; reconciles that start later see the deletionTimestamp and stop.
        """
        with self._lock:
            return self._peering_locks.setdefault((namespace, name), threading.Lock())

    # -- reconcile ---------------------------------------------------------------------------------
    def reconcile(self, namespace: str, name: str) -> Outcome:
        with self._serialized(namespace, name):
            return self._reconcile(namespace, name)

    def _reconcile(self, namespace: str, name: str) -> Outcome:
        body = self.local.get(r.LIQOPEERING, name, namespace)
        if body is None or body["metadata"].get("deletionTimestamp"):
            return Outcome(gone=True)
        meta, status = body["metadata"], dict(body.get("status") or {})
        logs.bind_peering(namespace, name, status.get("remoteClusterID"))
        outcome = Outcome()
        stages: dict[str, StageResult] = {}
        error: PeeringError | None = None
        mirror = None
        ids: tuple[str | None, str | None] = (None, None)
        created_anything = bool(status.get("remoteClusterID"))
        spec: LiqoPeeringSpec | None = None
        try:
            try:
                spec = parse_spec(body.get("spec") or {})
            except ValidationError as exc:
                raise PeeringError(
                    f"invalid spec: {exc.errors()[0]['msg']}", reason="InvalidSpec", transient=False
                ) from None
            outcome.watch_local.append((r.SECRET, namespace, f"metadata.name={spec.remote_kubeconfig_secret_ref.name}"))
            remote = self._remote_client(namespace, name, spec)
            outcome.remote = remote
            ctx = self._context(namespace, name, spec, remote)
            ids = (ctx.consumer.cluster_id, ctx.provider.cluster_id)
            logs.bind_peering(namespace, name, ctx.provider.cluster_id)
            self._check_duplicate(namespace, name, meta.get("creationTimestamp", ""), ctx.provider.cluster_id)
            ctx = PeeringContext(
                namespace,
                name,
                ctx.consumer,
                ctx.provider,
                consumer_tenant_ns=discovery.ensure_tenant_namespace(self.local, ctx.provider.cluster_id, ctx.owner),
                provider_tenant_ns=discovery.ensure_tenant_namespace(remote, ctx.consumer.cluster_id, ctx.owner),
            )
            created_anything = True
            if self.tenant_access is not None:
                discovery.ensure_tenant_access(self.local, ctx.consumer_tenant_ns, self.tenant_access, ctx.owner)
            self._watch_list(outcome, ctx)
            run = PeeringRun(spec, self.local, remote, ctx)
            stages = self._run_stages(run)
            mirror = mirror_foreign_cluster(self.local.get(r.FOREIGN_CLUSTER, ctx.provider.cluster_id))
            failed = next((s for s in stages.values() if s.state == "error"), None)
            if failed is not None:
                error = PeeringError(failed.message, reason=failed.reason)
        except (PeeringError, KubeconfigError) as exc:
            error = (
                exc
                if isinstance(exc, PeeringError)
                else PeeringError(f"LiqoPeering {namespace}/{name}: {exc.message}", reason=exc.reason, transient=False)
            )
        except ApiException as exc:
            error = _api_error(exc, "consumer or provider")
        timeout = spec.timeout_seconds if spec else 300.0  # the default 5m when the spec is unreadable
        obs = status_compute.Observation(
            generation=int(meta.get("generation") or 0),
            now=self.now(),
            timeout_seconds=float(timeout),
            stages=stages,
            error_reason=error.reason if error else None,
            error_message=redact(error.message) if error else None,
            mirror=mirror,
            liqo_checked=frozenset(
                stage
                for stage in STAGES
                if stage != "offloading" or spec is None or spec.offloading.create_virtual_node
            ),
            local_cluster_id=ids[0],
            remote_cluster_id=ids[1],
            created_anything=created_anything,
        )
        new_status, events = status_compute.compute(status, obs)
        self._write_status(body, status, new_status, events, stages)
        outcome.requeue_after = self._requeue_after(new_status, error, obs)
        outcome.transient_error = error is not None and error.transient
        self._last[(namespace, name)] = (obs, outcome, error)
        return outcome

    def refresh_mirror(self, namespace: str, name: str) -> Outcome | None:
        """Only the ForeignCluster changed: re-mirror it onto the last reconcile's observations.

        Two API reads and at most one write, so Liqo's view reaches the status well within a second.
        Returns None when a full reconcile is needed instead (nothing cached, or the spec changed).
        """
        with self._serialized(namespace, name):
            return self._refresh_mirror(namespace, name)

    def _refresh_mirror(self, namespace: str, name: str) -> Outcome | None:
        last = self._last.get((namespace, name))
        body = self.local.get(r.LIQOPEERING, name, namespace)
        if body is None or body["metadata"].get("deletionTimestamp"):
            return Outcome(gone=True)
        if last is None or last[0].generation != body["metadata"].get("generation"):
            return None
        previous, outcome, error = last
        remote_id = previous.remote_cluster_id
        if remote_id is None:
            return None
        logs.bind_peering(namespace, name, remote_id)
        fc = self.local.get(r.FOREIGN_CLUSTER, remote_id)
        obs = dataclasses.replace(previous, now=self.now(), mirror=mirror_foreign_cluster(fc))
        status = dict(body.get("status") or {})
        new_status, events = status_compute.compute(status, obs)
        self._write_status(body, status, new_status, events, obs.stages)
        outcome = dataclasses.replace(outcome, requeue_after=self._requeue_after(new_status, error, obs))
        self._last[(namespace, name)] = (obs, outcome, error)
        return outcome

    def forget(self, namespace: str, name: str) -> None:
        self._last.pop((namespace, name), None)

    def _run_stages(self, run: PeeringRun) -> dict[str, StageResult]:
        spec = run.spec

        def guarded(stage: str, fn: Callable[[], StageResult]) -> StageResult:
            try:
                return fn()
            except PeeringError as exc:
                return StageResult.failed(stage, exc.reason, exc.message)
            except ApiException as exc:
                err = _api_error(exc, "consumer or provider")
                return StageResult.failed(stage, err.reason, err.message)

        proxy = spec.authentication.proxy_url
        results: dict[str, StageResult] = {}
        if spec.authentication.in_band:
            # In-band authentication reaches the provider through the tunnel: networking first.
            results["networking"] = guarded("networking", lambda: networking.reconcile(run))
            if results["networking"].state == "ready":
                in_band = functools.partial(authentication.reconcile_in_band, run, proxy)
                results["authentication"] = guarded("authentication", in_band)
        else:
            # Independent stages run concurrently, as liqoctl does not.
            net = self._pool.submit(guarded, "networking", lambda: networking.reconcile(run))
            auth = self._pool.submit(guarded, "authentication", lambda: authentication.reconcile(run, proxy))
            results["networking"], results["authentication"] = net.result(), auth.result()
        if results.get("authentication") and results["authentication"].state == "ready":
            results["offloading"] = guarded("offloading", lambda: offloading.reconcile(run))
        return results

    def _watch_list(self, outcome: Outcome, ctx: PeeringContext) -> None:
        """What wakes this peering: its stage objects on both sides, the ForeignCluster, the nonce Secrets.

        Only the nonce Secrets are watched by name, so the operator needs no list/watch on every Secret of
        a tenant namespace (gateway key Secrets show up through their gateway's status.secretRef).
        """
        outcome.watch_local.append((r.FOREIGN_CLUSTER, None, f"metadata.name={ctx.provider.cluster_id}"))
        outcome.watch_local.append((r.SECRET, ctx.consumer_tenant_ns, f"metadata.name={naming.SIGNED_NONCE_SECRET}"))
        for res in (
            r.CONFIGURATION,
            r.GATEWAY_CLIENT,
            r.CONNECTION,
            r.DEPLOYMENT,
            r.IDENTITY,
            r.RESOURCE_SLICE,
            r.VIRTUAL_NODE,
            r.PUBLIC_KEY,
        ):
            outcome.watch_local.append((res, ctx.consumer_tenant_ns, None))
        outcome.watch_remote.append((r.SECRET, ctx.provider_tenant_ns, f"metadata.name={naming.NONCE_SECRET}"))
        for res in (r.CONFIGURATION, r.GATEWAY_SERVER, r.CONNECTION, r.DEPLOYMENT, r.TENANT):
            outcome.watch_remote.append((res, ctx.provider_tenant_ns, None))

    def _requeue_after(
        self, status: dict[str, Any], error: PeeringError | None, obs: status_compute.Observation
    ) -> float | None:
        if error is not None and error.transient:
            return TRANSIENT_RETRY_SECONDS  # unreachable clusters, Liqo not ready: retry soon; the runner backs off
        if status["peerStatus"] == "establishing":
            started = status_compute.parse_time(status["startedAt"])
            if started is not None:
                left = obs.timeout_seconds - (obs.now - started).total_seconds()
                return max(left, 0.5)  # wake exactly when the timeout falls due
        return None

    def _write_status(
        self,
        body: dict[str, Any],
        old: dict[str, Any],
        new: dict[str, Any],
        events: list[status_compute.EventSpec],
        stages: dict[str, StageResult],
    ) -> None:
        meta = body["metadata"]
        comparable = {k: v for k, v in new.items()}
        if any(old.get(k) != v for k, v in comparable.items()):
            self.local.merge_patch(
                r.LIQOPEERING, meta["name"], meta["namespace"], {"status": new}, subresource="status"
            )
        for event in events:
            self.events.emit(body, event.type, event.reason, event.message)
            level = log.warning if event.type == "Warning" else log.info
            level(event.message, reason=event.reason)
        self.metrics.observe(body, old, new, stages)

    # -- teardown ---------------------------------------------------------------------------------
    def teardown(self, body: dict[str, Any]) -> list[str]:
        """One unpeering pass; returns what remains. Raises PeeringError while the provider is unreachable."""
        key = (body["metadata"]["namespace"], body["metadata"]["name"])
        with self._serialized(*key):
            remaining = self._teardown(body)
        if not remaining:
            with self._lock:
                self._peering_locks.pop(key, None)
        return remaining

    def _teardown(self, body: dict[str, Any]) -> list[str]:
        meta, status = body["metadata"], body.get("status") or {}
        namespace, name = meta["namespace"], meta["name"]
        logs.bind_peering(namespace, name, status.get("remoteClusterID"))
        force = (meta.get("annotations") or {}).get(naming.FORCE_DELETE) == "true"
        local_id, remote_id = status.get("localClusterID"), status.get("remoteClusterID")
        if not local_id or not remote_id:
            return []  # nothing was ever created for this peering
        spec = parse_spec(body.get("spec") or {})
        remote: ClusterClient | None = None
        if not force:
            remote = self._remote_client(namespace, name, spec)
        from liqo_peering.liqo.context import ClusterInfo

        consumer_ns = discovery.find_tenant_namespace(self.local, remote_id) or ""
        provider_ns = (discovery.find_tenant_namespace(remote, local_id) or "") if remote else ""
        ctx = PeeringContext(
            namespace,
            name,
            ClusterInfo(local_id, (), "", spec.liqo_namespace),
            ClusterInfo(remote_id, (), "", spec.remote_liqo_namespace),
            consumer_tenant_ns=consumer_ns,
            provider_tenant_ns=provider_ns,
        )
        fc = self.local.get(r.FOREIGN_CLUSTER, remote_id)
        bidirectional = ((fc or {}).get("status") or {}).get("role") == "ConsumerAndProvider"
        return teardown.run(self.local, remote, ctx, bidirectional=bidirectional, local_only=force)

    def report_teardown(self, body: dict[str, Any], reason: str, message: str) -> None:
        """Say in status why deletion is not finishing (e.g. the provider is unreachable)."""
        meta = body["metadata"]
        now = self.now()
        from liqo_peering.status.conditions import make_condition, set_condition

        gen = int(meta.get("generation") or 0)
        conds = list((body.get("status") or {}).get("conditions") or [])
        conds = set_condition(conds, make_condition("Stalled", True, reason, message, gen, now))
        conds = set_condition(conds, make_condition("Ready", False, reason, message, gen, now))
        self.local.merge_patch(
            r.LIQOPEERING,
            meta["name"],
            meta["namespace"],
            {"status": {"conditions": conds, "peerStatus": "error", "stage": message}},
            subresource="status",
        )
