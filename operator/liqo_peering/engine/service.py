"""PeeringService: one reconcile of one LiqoPeering, from reading it to writing its status; one
unpeering pass; nothing else.

Everything here is synchronous (the runner calls it from a worker thread, one call per peering at a
time) and derives its state from the clusters, so an operator restarted at any point continues where
the last one stopped. It keeps no state between calls but its provider clients and what each unpeering
found (which objects the next unpeering pass waits for): the runner holds the per-peering state (its lock,
the last observations) and the watch hub decides what wakes a peering.
"""

from __future__ import annotations

import contextvars
import dataclasses
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog
from pydantic import ValidationError

from liqo_peering import logs
from liqo_peering.api.model import GatewayLocation, LiqoPeeringSpec, parse_spec
from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.clients.events import EventRecorder
from liqo_peering.clients.informer import Scope, SharedInformers
from liqo_peering.clients.remotes import RemoteClients
from liqo_peering.engine import (
    authentication,
    credentials,
    detail,
    discovery,
    networking,
    offloading,
    protection,
    reverse,
    teardown,
)
from liqo_peering.engine.direction import PeeringRun
from liqo_peering.engine.discovery import KubeconfigPolicy, TenantAccess
from liqo_peering.engine.together import together
from liqo_peering.errors import (
    DuplicatePeering,
    InternalError,
    InvalidSpec,
    PeeringError,
    as_peering_error,
    own_cluster_unavailable,
)
from liqo_peering.kubeconfig import KubeconfigError, RemoteKubeconfig
from liqo_peering.liqo import naming, unpeering
from liqo_peering.liqo import offloading as offloading_builders
from liqo_peering.liqo import resources as r
from liqo_peering.liqo.common import Common
from liqo_peering.liqo.context import ClusterInfo, PeeringContext
from liqo_peering.liqo.peeringuser import MintState
from liqo_peering.metrics import Metrics
from liqo_peering.redact import redact
from liqo_peering.stages import REVERSE_STAGES, STAGES, StageResult
from liqo_peering.status import compute as status_compute
from liqo_peering.status.credentials import CredentialsObservation
from liqo_peering.status.foreigncluster import mirror_foreign_cluster

log = structlog.get_logger("liqo_peering")
PeeringKey = tuple[str, str]  # (namespace, name)


def _redacted(obs: CredentialsObservation) -> CredentialsObservation:
    if obs.error_message is None:
        return obs
    return dataclasses.replace(obs, error_message=redact(obs.error_message))


@dataclass(frozen=True)
class Unpeering:
    """What an unpeering pass found: the provider client (None: this cluster only), the peering's cluster IDs
    and tenant namespaces, whether a reverse direction is removed too, and the tenant namespaces being
    deleted (side, name)."""

    remote: ClusterClient | None
    ctx: PeeringContext
    reverse: bool
    namespaces: tuple[tuple[str, str], ...] = ()
    gateway_location: GatewayLocation = "Provider"  # the cluster whose gateway serves (spec)


@dataclass
class Outcome:
    """What the runner needs after a pass: when to look again, what to watch, what was observed."""

    requeue_after: float | None = None
    transient_error: bool = False  # the runner backs off exponentially while this stays true
    gone: bool = False
    secret: tuple[str, str] | None = None  # the kubeconfig Secret (namespace, name)
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


class PeeringService:
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
        remote_ids: logs.RemoteClusterIds | None = None,
        versions: discovery.VersionCache | None = None,
        informers: SharedInformers | None = None,
    ) -> None:
        self.local = local
        # Shared with the log setup (cli.py), whose kopf lines name a peering's remote cluster ID.
        self.remote_ids = remote_ids if remote_ids is not None else logs.RemoteClusterIds()
        self.versions = versions if versions is not None else discovery.VersionCache()
        self.informers = informers if informers is not None else SharedInformers()
        self.protect_secrets = protect_secrets
        self.releases = protection.Releases()
        self.events = events
        self.metrics = metrics
        self.policy = policy
        self.tenant_access = tenant_access
        self.now = now
        self.remotes = remotes if remotes is not None else RemoteClients()
        self._guard = threading.Lock()
        self._unpeering: dict[tuple[str, str], Unpeering] = {}
        # Per peering being unpeered: what teardown.run found so far (kept in memory only: a restarted operator
        # reads everything again once).
        self._progress: dict[tuple[str, str], teardown.Progress] = {}

    # -- helpers ---------------------------------------------------------------------------------
    def _discovery_client(self, body: dict[str, Any], spec: LiqoPeeringSpec) -> ClusterClient:
        """The provider client discovery and the duplicate check use: nothing is minted yet."""
        meta = body["metadata"]
        kubeconfig = credentials.discovery_kubeconfig(
            self.local, body, spec, self.policy, self.now(), protect=self.protect_secrets
        )
        return self.remotes.get((meta["namespace"], meta["name"]), kubeconfig)

    def _remote_client(
        self, body: dict[str, Any], spec: LiqoPeeringSpec, consumer_id: str
    ) -> tuple[ClusterClient, credentials.Credentials]:
        """The provider client of this pass: the Secret's kubeconfig, or the credential minted with it."""
        meta = body["metadata"]
        found = credentials.provider_credentials(
            self.local, body, spec, self.policy, self.now(), protect=self.protect_secrets, consumer_id=consumer_id
        )
        return self.remotes.get((meta["namespace"], meta["name"]), found.kubeconfig), found

    def release(self, namespace: str, name: str) -> None:
        """The peering is gone: let go of its provider client."""
        self.remotes.release((namespace, name))
        self.remote_ids.forget(namespace, name)
        with self._guard:
            self._unpeering.pop((namespace, name), None)
            self._progress.pop((namespace, name), None)

    def unpeering(self, namespace: str, name: str) -> Unpeering | None:
        """What the last unpeering pass of the peering found, if one ran."""
        with self._guard:
            return self._unpeering.get((namespace, name))

    def _check_duplicate(self, namespace: str, name: str, created: str, remote_id: str) -> None:
        """No other LiqoPeering, in any namespace, made before this one peers with the same provider. Read from
        the shared informer of every LiqoPeering, by its index of remote cluster IDs: a pass costs the same
        with 1 or 500 LiqoPeerings. Until it has listed (the first passes after a start), from a list."""
        mine = (created, namespace, name)
        peerings = self.informers.of(self.local, Scope(r.LIQOPEERING))  # started by the CLI
        peerings.add_index("remoteClusterID", lambda obj: (obj.get("status") or {}).get("remoteClusterID"))
        found = peerings.indexed("remoteClusterID", remote_id) if peerings.synced else self.local.find(r.LIQOPEERING)
        for other in found:
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

    # -- reconcile ---------------------------------------------------------------------------------
    def reconcile(self, namespace: str, name: str, known: Outcome | None = None) -> Outcome:
        with self.remote_ids.peering_pass(namespace, name):
            return self._reconcile(namespace, name, known)

    def _reconcile(self, namespace: str, name: str, known: Outcome | None = None) -> Outcome:
        """One pass. ``known``: the last pass, when it succeeded and nothing but Liqo's objects changed since;
        its discovery (cluster IDs, CIDRs, tenant namespaces, the duplicate check) is then reused, as
        none of it changes while the spec and the kubeconfig stay (the runner drops it on every spec
        change, Secret change, error and resync)."""
        body = self.local.get(r.LIQOPEERING, name, namespace)
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
            outcome.secret = (namespace, spec.remote_kubeconfig_secret_ref.name)
            outcome.liqo_namespaces = (spec.liqo_namespace, spec.remote_liqo_namespace)
            outcome.gateway_location = spec.networking.gateway_server.location
            outcome.minted_secret, outcome.mints = naming.minted_secret(name), spec.credentials.mint
            # Without minting, protected before anything exists that unpeering would need it for.
            if not spec.credentials.mint and self.protect_secrets:
                protection.protect(self.local, namespace, spec.remote_kubeconfig_secret_ref.name)
            # Discovery, the duplicate and version checks come before any minting: a duplicate never binds its
            # own user in place of the first peering's on the provider (the minted names are the consumer's).
            remote = outcome.remote = self._discovery_client(body, spec)
            reused = known.ctx if known is not None and known.error is None and known.remote is remote else None
            discovered = reused or self._discover(namespace, name, meta, spec, remote)
            # Before anything is made on either cluster (tenant namespaces included): a pair that cannot peer.
            version_check = discovery.check_versions(discovered, spec, status)
            if version_check.refusal is not None:
                raise version_check.refusal
            ctx = reused or self._tenancy(discovered, remote)
            remote, found = self._remote_client(body, spec, ctx.consumer.cluster_id)  # protects what unpeering needs
            outcome.remote = remote
            minted = found.observation
            ids = (ctx.consumer.cluster_id, ctx.provider.cluster_id)
            self.remote_ids.bind(namespace, name, ctx.provider.cluster_id)
            created_anything = True
            outcome.ctx = ctx
            removing = not spec.bidirectional and status_compute.has_reverse(status)
            run = PeeringRun(spec, self.local, remote, ctx)
            stages = self._run_stages(run, removing)
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
        new_status = self._write_status(body, status, obs)
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
            created_anything=bool(status.get("remoteClusterID")),
            seen=False,
        )
        new_status = self._write_status(body, status, obs)
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
        self._check_duplicate(namespace, name, meta.get("creationTimestamp", ""), provider.cluster_id)
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
        new_status = self._write_status(body, dict(body.get("status") or {}), obs)
        return dataclasses.replace(
            last,
            observation=obs,
            requeue_after=status_compute.requeue_after(new_status, obs, last.transient_error),
        )

    def _run_stages(self, run: PeeringRun, removing_reverse: bool = False) -> dict[str, StageResult]:
        """The stages of this pass: the forward ones, and the reverse direction's when spec.bidirectional is
        true (``removing_reverse``: it was, and what it made may remain)."""
        spec = run.spec
        rev = reverse.run_of(run) if spec.bidirectional else None

        outage: list[PeeringError] = []

        def guarded(stage: str, fn: Callable[[], StageResult]) -> StageResult:
            """The stage's boundary: whatever it raises is its result, so that no stage goes missing."""
            try:
                return fn()
            except Exception as raised:
                exc = as_peering_error(raised, f"the {stage} stage")
                if own_cluster_unavailable(exc):
                    outage.append(exc)  # raised below: the authentication stage runs in a thread
                elif isinstance(exc, InternalError):
                    log.error("stage failed", stage=stage, exc_info=raised)
                # Its message reaches the stage condition as it is: scrub it like the Ready one.
                return StageResult.failed(stage, exc, redact(exc.message))

        proxy = spec.authentication.proxy_url
        in_band = spec.authentication.in_band
        results: dict[str, StageResult] = {}
        auth_jobs: dict[str, Callable[[], StageResult]] = {
            "authentication": (
                (lambda: authentication.reconcile_in_band(run, proxy))
                if in_band
                else (lambda: authentication.reconcile(run, proxy))
            )
        }
        if rev is not None:
            auth_jobs["reverse-authentication"] = lambda: reverse.authenticate(rev, in_band)
        if in_band:
            # In-band authentication reaches the other cluster through the tunnel: networking first.
            results["networking"] = guarded("networking", lambda: networking.reconcile(run))
            if results["networking"].state == "ready":
                results.update(self._concurrently(guarded, auth_jobs))
        else:
            # Independent stages run concurrently (liqoctl runs them one after the other): authentication
            # (each direction's) in a thread of its own for this pass, so no peering waits for another one's.
            results.update(
                self._concurrently(guarded, auth_jobs, main=("networking", lambda: networking.reconcile(run)))
            )
        if results.get("authentication") and results["authentication"].state == "ready" and not outage:
            results["offloading"] = guarded("offloading", lambda: offloading.reconcile(run))
        if rev is not None and not outage:
            back = results.get("reverse-authentication")
            if back is not None and back.state == "ready":
                results["reverse-offloading"] = guarded("reverse-offloading", lambda: reverse.offload(rev))
        elif removing_reverse and not outage:
            # One unpeering of the reverse direction: its result (still removing, gone, or an error) is both
            # reverse stages'.
            gone = guarded(REVERSE_STAGES[0], lambda: reverse.remove(run)[REVERSE_STAGES[0]])
            results.update({stage: dataclasses.replace(gone, stage=stage) for stage in REVERSE_STAGES})
        if outage:
            raise outage[0]
        return results

    @staticmethod
    def _concurrently(
        guarded: Callable[[str, Callable[[], StageResult]], StageResult],
        jobs: dict[str, Callable[[], StageResult]],
        main: tuple[str, Callable[[], StageResult]] | None = None,
    ) -> dict[str, StageResult]:
        """Run each job in a thread of its own (and ``main`` on this one meanwhile); their results by stage."""
        results: dict[str, StageResult] = {}
        workers = [
            threading.Thread(  # each in a copy of this pass's context: its lines name the peering
                target=contextvars.copy_context().run,
                args=(lambda stage=stage, fn=fn: results.update({stage: guarded(stage, fn)}),),
                name=f"stage-{stage}",
            )
            for stage, fn in jobs.items()
        ]
        for worker in workers:
            worker.start()
        try:
            if main is not None:
                results[main[0]] = guarded(*main)
        finally:
            # Whatever the main stage does, no stage thread outlives the pass (nor the peering's lock).
            for worker in workers:
                worker.join()
        return results

    def _write_status(
        self, body: dict[str, Any], old: dict[str, Any], obs: status_compute.Observation
    ) -> dict[str, Any]:
        """The one status writer: compute, write only what changed, emit the transitions' Events."""
        new, events = status_compute.compute(old, obs)
        meta = body["metadata"]
        if any(old.get(k) != v for k, v in new.items()):
            self.local.merge_patch(
                r.LIQOPEERING, meta["name"], meta["namespace"], {"status": new}, subresource="status"
            )
        for event in events:
            self.events.emit(body, event.type, event.reason, event.message)
            level = log.warning if event.type == "Warning" else log.info
            level(redact(event.message), reason=event.reason)  # the Event is scrubbed too (events.py)
        self.metrics.observe(body, old, new)
        return new

    # -- teardown ---------------------------------------------------------------------------------
    def teardown(self, body: dict[str, Any]) -> list[str]:
        with self.remote_ids.peering_pass(body["metadata"]["namespace"], body["metadata"]["name"]):
            return self._teardown(body)

    def _teardown(self, body: dict[str, Any]) -> list[str]:
        """One unpeering pass; returns what remains. Raises PeeringError while the provider is unreachable."""
        meta, status = body["metadata"], body.get("status") or {}
        namespace, name = meta["namespace"], meta["name"]
        self.remote_ids.bind(namespace, name, status.get("remoteClusterID"))
        force = (meta.get("annotations") or {}).get(naming.FORCE_DELETE) == "true"
        local_id, remote_id = status.get("localClusterID"), status.get("remoteClusterID")
        if not local_id or not remote_id:
            # Not peered, but a pass may have minted before its status was written: found by the peering's name.
            return self._revoke_undiscovered(body, force)
        spec = parse_spec(body.get("spec") or {})
        # Read side by side: every pass reads them, none is cached. Whether the provider consumes this cluster
        # too is read before the reverse direction below is unpeered: that deletes the Tenant it looks at, in
        # the foreground, so the pass that does it returns before the answer is used.
        minted, kubeconfig, reverse_peered = together(
            lambda: credentials.mint_state(self.local, namespace, name),
            lambda: _or_error(lambda: discovery.read_remote_kubeconfig(self.local, namespace, name, spec, self.policy)),
            lambda: teardown.reverse_peered(self.local, remote_id),
        )
        if not force and minted.revoking:
            # Unpeered already, and the minted identity on its way out: its credential no longer works.
            return credentials.revoke(self.local, body, spec, self.policy, local_id)
        remote: ClusterClient | None = None
        if not force:
            remote = self._teardown_client(namespace, name, minted, kubeconfig)
        consumer_ns, provider_ns = self._tenant_namespaces(namespace, name, remote, local_id, remote_id)
        ctx = PeeringContext(
            namespace,
            name,
            ClusterInfo(local_id, (), "", spec.liqo_namespace),
            ClusterInfo(remote_id, (), "", spec.remote_liqo_namespace),
            consumer_tenant_ns=consumer_ns,
            provider_tenant_ns=provider_ns,
        )
        reverse = spec.bidirectional or status_compute.has_reverse(status)
        with self._guard:
            self._unpeering[(namespace, name)] = Unpeering(
                remote, ctx, reverse, gateway_location=spec.networking.gateway_server.location
            )
        if force:
            # As liqoctl force unpeer: Liqo on this cluster stops waiting for the provider, first.
            teardown.mark_unreachable(self.local, remote_id)
        # liqoctl unpeer's order for a bidirectional peering: one direction first, keeping the network the
        # other one uses; then the other, no longer bidirectional, with the network last. The reverse
        # direction goes first, as it is the one this peering added on top of the forward one.
        with self._guard:
            done = self._progress.setdefault((namespace, name), teardown.Progress())
        if reverse:
            left = teardown.run(self.local, remote, ctx, bidirectional=True, local_only=force, reverse=True, done=done)
            if left:
                return left
        bidirectional = reverse_peered  # a reverse direction made by others
        remaining = teardown.run(
            self.local,
            remote,
            ctx,
            bidirectional=bidirectional,
            local_only=force,
            in_band=spec.authentication.in_band,
            done=done,
        )
        if remaining:
            return remaining
        doomed = unpeering.namespaces_to_delete(
            {"consumer": consumer_ns, "provider": provider_ns},
            delete_namespaces=spec.deletion.delete_tenant_namespaces,
            force=force,
            other_direction=bidirectional,
        )
        with self._guard:  # their deletion wakes the next pass too
            self._unpeering[(namespace, name)] = Unpeering(
                remote, ctx, reverse, tuple(doomed), spec.networking.gateway_server.location
            )
        remaining = teardown.delete_namespaces({"consumer": self.local, "provider": remote}, doomed)
        if remaining:
            return remaining
        if force:
            credentials.forget(self.local, body)
            return []
        # Last, as `liqoctl delete peering-user` follows `liqoctl unpeer`: the minted identity, if any.
        return credentials.revoke(self.local, body, spec, self.policy, local_id)

    def _revoke_undiscovered(self, body: dict[str, Any], force: bool) -> list[str]:
        """Teardown without cluster IDs in status: only a minted identity (and its Secret) may exist."""
        meta = body["metadata"]
        if not credentials.has_minted(self.local, meta["namespace"], meta["name"]):
            return []  # nothing was ever created for this peering
        if force:
            credentials.forget(self.local, body)
            return []
        spec = parse_spec(body.get("spec") or {})
        return credentials.revoke(self.local, body, spec, self.policy, None)

    def _teardown_client(
        self, namespace: str, name: str, minted: MintState, kubeconfig: RemoteKubeconfig | Exception
    ) -> ClusterClient:
        """Unpeer with the minted credential when there is one (the bootstrap Secret may be gone), else with
        the Secret's kubeconfig (``kubeconfig``: as read, or why it could not be)."""
        usable = credentials.minted_kubeconfig(minted, self.policy) or kubeconfig
        if isinstance(usable, Exception):
            raise usable
        return self.remotes.get((namespace, name), usable)

    def _tenant_namespaces(
        self, namespace: str, name: str, remote: ClusterClient | None, local_id: str, remote_id: str
    ) -> tuple[str, str]:
        """The peering's tenant namespaces on both clusters (one not found: ""). Found once per unpeering, and
        then taken from the last pass's record: Liqo names them by cluster ID, and they go only after
        everything in them."""
        last = self.unpeering(namespace, name)
        if last is not None and last.ctx.consumer_tenant_ns and (last.ctx.provider_tenant_ns or remote is None):
            return last.ctx.consumer_tenant_ns, last.ctx.provider_tenant_ns
        consumer_ns, provider_ns = together(
            lambda: discovery.find_tenant_namespace(self.local, remote_id) or "",
            lambda: (discovery.find_tenant_namespace(remote, local_id) or "") if remote else "",
        )
        return consumer_ns, provider_ns

    def release_secret(self, namespace: str, secret: str | None) -> None:
        """The Secret's protection goes once no LiqoPeering uses it (one switched to another Secret)."""
        if not secret:
            return
        still = protection.release(self.local, namespace, secret)
        if still:
            log.info(f"Secret {namespace}/{secret} stays protected: LiqoPeering {', '.join(still)} uses it")

    def unpeered(self, body: dict[str, Any]) -> None:
        """The LiqoPeering's unpeering is over: its Secret's protection goes unless another LiqoPeering still
        needs it. A failure is left to the sweep (engine/sweep.py), which looks again once the LiqoPeering
        is gone: the deletion does not wait for the Secret."""
        meta = body["metadata"]
        secret = protection.secret_of(body)
        try:
            still = self.releases.after_unpeering(self.local, body)
        except PeeringError as exc:
            log.warning(
                f"could not release Secret {meta['namespace']}/{secret}: {exc.message}; the sweep retries",
                reason=exc.reason,
            )
            return
        if still:
            log.info(f"Secret {meta['namespace']}/{secret} stays protected: LiqoPeering {', '.join(still)} uses it")

    def report_teardown(self, body: dict[str, Any], reason: str, message: str) -> None:
        """Say in status why deletion is not finishing (e.g. the provider is unreachable)."""
        meta = body["metadata"]
        patch = status_compute.teardown_blocked(
            body.get("status"), reason, message, int(meta.get("generation") or 0), self.now()
        )
        self.local.merge_patch(r.LIQOPEERING, meta["name"], meta["namespace"], {"status": patch}, subresource="status")
        self.metrics.track(meta, {**(body.get("status") or {}), **patch})


def _or_error(read: Callable[[], RemoteKubeconfig]) -> RemoteKubeconfig | Exception:
    """A read whose failure matters only if its answer is needed: the failure, to raise then."""
    try:
        return read()
    except Exception as exc:  # raised as it was if the answer is needed, through the one error boundary
        return exc
