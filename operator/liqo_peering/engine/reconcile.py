"""The reconcile pass: one reconcile of one LiqoPeering, from reading it to writing its status.

Everything here is synchronous (the runner calls it from a worker thread, one call per peering at a
time) and derives its state from the clusters, so an operator restarted at any point continues where
the last one stopped. It keeps no state between calls but its provider clients: the runner holds the
per-peering state (its lock, the last observations) and the watch hub decides what wakes a peering.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import structlog
from pydantic import ValidationError

from liqo_peering import logs
from liqo_peering.api.model import GatewayLocation, LiqoPeeringSpec, parse_spec
from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.clients.events import EventRecorder
from liqo_peering.clients.informer import SharedInformers
from liqo_peering.clients.remotes import RemoteClients
from liqo_peering.engine import credentials, detail, discovery, protection, reverse
from liqo_peering.engine.direction import PassMemo, PeeringRun
from liqo_peering.engine.discovery import KubeconfigPolicy, TenantAccess
from liqo_peering.engine.duplicate import DuplicateCheck
from liqo_peering.engine.stagerunner import Listen, run_stages
from liqo_peering.engine.statuswriter import StatusWriter
from liqo_peering.errors import (
    ClusterProfileNotFound,
    InternalError,
    InvalidSpec,
    PeeringError,
    own_cluster_unavailable,
)
from liqo_peering.health import TrackedPool
from liqo_peering.kubeconfig import KubeconfigError, RemoteKubeconfig
from liqo_peering.liqo import offloading as offloading_builders
from liqo_peering.liqo import resources as r
from liqo_peering.liqo.common import Common
from liqo_peering.liqo.context import PeeringContext
from liqo_peering.metrics import Metrics
from liqo_peering.redact import redact
from liqo_peering.stages import STAGES, StageResult
from liqo_peering.status import compute as status_compute
from liqo_peering.status.credentials import CredentialsObservation
from liqo_peering.status.foreigncluster import mirror_foreign_cluster

log = structlog.get_logger("liqo_peering")


def _redacted(obs: CredentialsObservation) -> CredentialsObservation:
    if obs.error_message is None:
        return obs
    return dataclasses.replace(obs, error_message=redact(obs.error_message))


@dataclass
class Outcome:
    """What the runner needs after a pass: when to look again, what to watch, what was observed."""

    requeue_after: float | None = None
    transient_error: bool = False  # the runner backs off exponentially while this stays true
    gone: bool = False
    secret: tuple[str, str] | None = None  # the kubeconfig Secret (namespace, name)
    profile: tuple[str, str] | None = None  # or the ClusterProfile its kubeconfig comes from (namespace, name)
    cloud: bool = False  # or the operator's cloud identity (spec.remoteCluster): nothing to watch on the consumer
    # The minted kubeconfig's Secret (same namespace): with spec.credentials.mint the peering's credential,
    # without it one left from when it minted, which a pass revokes (``mints`` says which).
    minted_secret: str | None = None
    mints: bool = False
    remote: ClusterClient | None = None
    ctx: PeeringContext | None = None
    observation: status_compute.Observation | None = None
    error: PeeringError | None = None
    reverse: bool = False  # the reverse direction is on, or still being removed: its objects wake the peering
    liqo_namespaces: tuple[str, str] | None = None  # Liqo's namespace on the consumer and the provider (spec)
    gateway_location: GatewayLocation = "Provider"  # the cluster whose gateway serves (spec)
    memo: PassMemo = field(default_factory=PassMemo)  # reused with the discovery (``ctx``)


Routed = Callable[[Outcome], None]  # told a pass's routes once its context is known (Peerings._routed)


class Reconciler:
    def __init__(
        self,
        local: ClusterClient,
        events: EventRecorder,
        metrics: Metrics,
        policy: KubeconfigPolicy,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        tenant_access: TenantAccess | None = None,
        remotes: RemoteClients | None = None,
        protect_secrets: bool = True,
        calls: TrackedPool | None = None,
        remote_ids: logs.RemoteClusterIds | None = None,
        versions: discovery.VersionCache | None = None,
        informers: SharedInformers | None = None,
        superseded: Callable[[str, str], bool] | None = None,
        restart_liqo: bool = False,
        hold: Callable[[str, str, float], None] | None = None,
        listen: Callable[[str, str], Listen] | None = None,
    ) -> None:
        """``calls``: the pool of sub-calls the stages run side by side in (None: one after another).
        ``remote_ids``: shared with the log setup (cli.py), whose kopf lines name a peering's remote cluster ID;
        ``informers``: the shared informers, the cluster-wide one of LiqoPeerings among them (the duplicate
        check); ``superseded``: whether a peering's next pass is due already, ``hold``: wake one later to write
        the status it holds (statuswriter.py); ``listen``: a peering's wake-ups during its pass (stagerunner.py)."""
        self.local = local
        self.restart_liqo = restart_liqo
        self.remote_ids = remote_ids if remote_ids is not None else logs.RemoteClusterIds()
        self.versions = versions if versions is not None else discovery.VersionCache()
        self.duplicates = DuplicateCheck(local, informers if informers is not None else SharedInformers())
        self.protect_secrets = protect_secrets
        self.metrics = metrics
        self.policy = policy
        self.tenant_access = tenant_access
        self.now = now
        self.remotes = remotes if remotes is not None else RemoteClients()
        self.calls = calls
        self.listen = listen
        self.status = StatusWriter(local, events, metrics, now, superseded, hold)

    def _discovery_client(self, body: dict[str, Any], spec: LiqoPeeringSpec) -> tuple[ClusterClient, RemoteKubeconfig]:
        """The provider client discovery and the duplicate check use, and its kubeconfig: nothing is minted yet."""
        meta = body["metadata"]
        kubeconfig = credentials.discovery_kubeconfig(
            self.local, body, spec, self.policy, self.now(), protect=self.protect_secrets
        )
        return self.remotes.get((meta["namespace"], meta["name"]), kubeconfig), kubeconfig

    def _remote_client(
        self, body: dict[str, Any], spec: LiqoPeeringSpec, consumer_id: str, read: RemoteKubeconfig
    ) -> tuple[ClusterClient, credentials.Credentials]:
        """The provider client of this pass: the Secret's kubeconfig (``read`` by discovery), or the credential
        minted with it."""
        meta = body["metadata"]
        found = credentials.provider_credentials(
            self.local,
            body,
            spec,
            self.policy,
            self.now(),
            protect=self.protect_secrets,
            consumer_id=consumer_id,
            read=read,
        )
        return self.remotes.get((meta["namespace"], meta["name"]), found.kubeconfig), found

    def forget(self, namespace: str, name: str) -> None:
        """The peering is gone: let go of its provider client."""
        self.remotes.release((namespace, name))
        self.remote_ids.forget(namespace, name)
        self.status.forget(namespace, name)

    def reconcile(
        self, namespace: str, name: str, known: Outcome | None = None, routed: Routed | None = None
    ) -> Outcome:
        with self.remote_ids.peering_pass(namespace, name):
            return self._reconcile(namespace, name, known, routed)

    def _reconcile(self, namespace: str, name: str, known: Outcome | None, routed: Routed | None) -> Outcome:
        """One pass. ``known``: the last pass, when it succeeded and nothing but Liqo's objects changed since;
        its discovery (cluster IDs, CIDRs, tenant namespaces, the duplicate check) is then reused, as
        none of it changes while the spec and the kubeconfig stay (the runner drops it on every spec
        change, error and resync, and a changed kubeconfig makes another provider client, which it is not
        reused with). ``routed``: told what the pass will watch once its context is known, before the
        stages write."""
        # A full pass reads its own object from the API server: woken by a spec change (kopf's event), the
        # shared informer's cache may not hold that change yet, and nothing would wake the pass again.
        read = self.local.get if known is not None else self.local.read
        body = read(r.LIQOPEERING, name, namespace)
        if body is None or body["metadata"].get("deletionTimestamp"):
            return Outcome(gone=True)
        meta, status = body["metadata"], dict(body.get("status") or {})
        self.remote_ids.bind(namespace, name, status.get("remoteClusterID"))
        outcome = Outcome()
        stages: dict[str, StageResult] = {}
        error: PeeringError | None = None
        mirror = None
        shown: dict[str, Any] | None = None  # what liqoctl info peer shows (status/detail.py)
        ids: tuple[str | None, str | None] = (None, None)
        created_anything = bool(status.get("remoteClusterID"))
        spec: LiqoPeeringSpec | None = None
        minted: CredentialsObservation | None = None
        version_check: discovery.VersionCheck | None = None
        try:
            try:
                spec = parse_spec(body.get("spec") or {})
            except ValidationError as exc:
                raise InvalidSpec(f"invalid spec: {exc.errors()[0]['msg']}") from None
            # The Secret the provider source reads, as the protection's release finds it again.
            source = credentials.sources(body, spec, self.policy)
            outcome.secret, outcome.profile = source.secret, source.profile
            outcome.cloud = spec.remote_cluster is not None
            outcome.liqo_namespaces = (spec.liqo_namespace, spec.remote_liqo_namespace)
            outcome.gateway_location = spec.networking.gateway_server.location
            outcome.minted_secret, outcome.mints = source.minted_secret, source.mints
            # Without minting, protected before anything exists that unpeering would need it for.
            if (
                self.protect_secrets
                and source.secret is not None
                and not (spec.credentials.mint and spec.remote_cluster is None)
            ):
                protection.protect(self.local, *source.secret)
            # Discovery, the duplicate and version checks come before any minting: a duplicate never binds its
            # own user in place of the first peering's on the provider (the minted names are the consumer's).
            remote, read_kubeconfig = self._discovery_client(body, spec)
            outcome.remote = remote
            reused = known.ctx if known is not None and known.error is None and known.remote is remote else None
            sides = ((self.local, reused.consumer), (remote, reused.provider)) if reused is not None else ()
            if not all(discovery.same_identity(client, info) for client, info in sides):
                reused = None  # Liqo was reinstalled or upgraded on either side: discovered again
            discovered = reused or self._discover(namespace, name, meta, spec, remote)
            # Before anything is made on either cluster (tenant namespaces included): a pair that cannot peer.
            version_check = discovery.check_versions(discovered, spec, status)
            if version_check.refusal is not None:
                raise version_check.refusal
            ctx = reused or self._tenancy(discovered, remote)
            # Protects what unpeering needs.
            remote, found = self._remote_client(body, spec, ctx.consumer.cluster_id, read_kubeconfig)
            outcome.remote = remote
            minted = found.observation
            ids = (ctx.consumer.cluster_id, ctx.provider.cluster_id)
            self.remote_ids.bind(namespace, name, ctx.provider.cluster_id)
            created_anything = True
            outcome.ctx = ctx
            removing = not spec.bidirectional and status_compute.has_reverse(status)
            outcome.memo = known.memo if reused is not None and known is not None else PassMemo()
            run = PeeringRun(spec, self.local, remote, ctx, memo=outcome.memo, restart_liqo=self.restart_liqo)
            outcome.reverse = spec.bidirectional or removing
            if routed is not None:
                # The informers of what the stages make start before they make it: Liqo answers a first pass's
                # writes (the nonce, the Configurations) within a few hundred ms, before that pass ends.
                routed(outcome)
            listen = self.listen(namespace, name) if self.listen is not None else None
            stages = run_stages(run, self.calls, removing, listen)
            shown = detail.observe(run, reverse.run_of(run) if spec.bidirectional else None)
            mirror = mirror_foreign_cluster(self.local.get(r.FOREIGN_CLUSTER, ctx.provider.cluster_id))
            failed = next((s for s in stages.values() if s.state == "error"), None)
            if failed is not None:
                error = failed.error
        except credentials.MintingFailed as exc:
            error, minted = (
                exc.error,
                dataclasses.replace(exc.observation, error_reason=exc.error.reason, error_message=exc.error.message),
            )
        except KubeconfigError as exc:  # its rules name fields only: say whose kubeconfig it is
            error = exc.restated(f"LiqoPeering {namespace}/{name}: {exc.message}")
        except ClusterProfileNotFound as exc:
            error = exc
            if exc.transient:  # its kind is not served: an informer of it would never sync (readiness waits)
                outcome.profile = None
        except PeeringError as exc:
            error = exc
        except Exception as exc:  # a bug or an unexpected failure: reported like any other error
            log.error("pass failed", exc_info=exc)
            error = InternalError(exc, "the pass")
        if error is not None and own_cluster_unavailable(error):
            raise error  # the runner retries; the status stays as the last pass that could see it left it
        timeout = spec.timeout_seconds if spec else 300.0  # the default 5m when the spec is unreadable
        obs = status_compute.Observation(
            generation=int(meta.get("generation") or 0),
            now=self.now(),
            timeout_seconds=float(timeout),
            stages=stages,
            error_reason=error.reason if error else None,
            error_message=redact(error.message) if error else None,
            error_waiting=bool(error and error.waiting),
            mirror=mirror,
            liqo_checked=frozenset(
                stage
                for stage in STAGES
                if stage != "offloading" or spec is None or offloading_builders.wants_virtual_node(spec.offloading)
            ),
            local_cluster_id=ids[0],
            remote_cluster_id=ids[1],
            created_anything=created_anything,
            credentials=_redacted(minted) if minted is not None else None,
            bidirectional=bool(spec and spec.bidirectional),
            versions=version_check.versions if version_check else None,
            version_notices=version_check.notices if version_check else None,
            detail=shown,
        )
        transient = error is not None and error.transient
        new_status = self.status.write(body, status, obs)
        outcome.requeue_after = status_compute.requeue_after(new_status, obs, transient)
        outcome.transient_error = transient
        outcome.observation, outcome.error = obs, error
        outcome.reverse = obs.bidirectional or status_compute.has_reverse(new_status)
        return outcome

    def report_failure(self, namespace: str, name: str, error: PeeringError) -> Outcome:
        """A pass failed where it could not say so itself (reading the peering, writing its status): say it
        now. What that pass did not get to see (the stages, the credentials, Liqo's view) stays as it was."""
        body = self.local.get(r.LIQOPEERING, name, namespace)
        if body is None or body["metadata"].get("deletionTimestamp"):
            return Outcome(gone=True)
        meta, status = body["metadata"], dict(body.get("status") or {})
        self.remote_ids.bind(namespace, name, status.get("remoteClusterID"))
        try:
            timeout = float(parse_spec(body.get("spec") or {}).timeout_seconds)
        except ValidationError:
            timeout = 300.0  # the default 5m, as a pass with an unreadable spec uses
        obs = status_compute.Observation(
            generation=int(meta.get("generation") or 0),
            now=self.now(),
            timeout_seconds=timeout,
            error_reason=error.reason,
            error_message=redact(error.message),
            error_waiting=error.waiting,
            created_anything=bool(status.get("remoteClusterID")),
            seen=False,
        )
        new_status = self.status.write(body, status, obs)
        return Outcome(
            requeue_after=status_compute.requeue_after(new_status, obs, error.transient),
            transient_error=error.transient,
            observation=obs,
            error=error,
        )

    def _discover(
        self, namespace: str, name: str, meta: dict[str, Any], spec: LiqoPeeringSpec, remote: ClusterClient
    ) -> PeeringContext:
        """Both clusters' IDs, CIDRs and versions, and the duplicate check (no tenant namespaces yet)."""
        consumer = discovery.cluster_info(self.local, spec.liqo_namespace, self.versions)
        provider = discovery.cluster_info(remote, spec.remote_liqo_namespace, self.versions)
        self.remote_ids.bind(namespace, name, provider.cluster_id)
        self.duplicates(namespace, name, meta.get("creationTimestamp", ""), provider.cluster_id)
        return PeeringContext(namespace, name, consumer, provider, common=Common.of(spec.common_metadata))

    def _tenancy(self, found: PeeringContext, remote: ClusterClient) -> PeeringContext:
        """Both tenant namespaces (made if absent), and the operator's access to the consumer's."""
        owner = found.owner
        ctx = dataclasses.replace(
            found,
            consumer_tenant_ns=discovery.ensure_tenant_namespace(
                self.local, found.provider.cluster_id, owner, found.common
            ),
            provider_tenant_ns=discovery.ensure_tenant_namespace(
                remote, found.consumer.cluster_id, owner, found.common
            ),
        )
        if self.tenant_access is not None:
            discovery.ensure_tenant_access(
                self.local, ctx.consumer_tenant_ns, self.tenant_access, ctx.owner, ctx.common
            )
        return ctx

    def refresh_mirror(self, namespace: str, name: str, last: Outcome) -> Outcome | None:
        with self.remote_ids.peering_pass(namespace, name):
            return self._refresh_mirror(namespace, name, last)

    def _refresh_mirror(self, namespace: str, name: str, last: Outcome) -> Outcome | None:
        """Only the ForeignCluster changed: re-mirror it onto the last reconcile's observations.

        Two API reads and at most one write, so Liqo's view reaches the status well within a second.
        Returns None when a full reconcile is needed instead (nothing observed yet, or the spec changed).
        """
        previous = last.observation
        body = self.local.get(r.LIQOPEERING, name, namespace)
        if body is None or body["metadata"].get("deletionTimestamp"):
            return Outcome(gone=True)
        if previous is None or previous.generation != body["metadata"].get("generation"):
            return None
        remote_id = previous.remote_cluster_id
        if remote_id is None:
            return None
        self.remote_ids.bind(namespace, name, remote_id)
        fc = self.local.get(r.FOREIGN_CLUSTER, remote_id)
        obs = dataclasses.replace(previous, now=self.now(), mirror=mirror_foreign_cluster(fc))
        new_status = self.status.write(body, dict(body.get("status") or {}), obs)
        return dataclasses.replace(
            last,
            observation=obs,
            requeue_after=status_compute.requeue_after(new_status, obs, last.transient_error),
        )
