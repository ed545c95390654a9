"""The unpeering pass: one pass of deleting a LiqoPeering, shaped like the reconcile pass. It returns what is
left and what it waits for (the routes whose events wake the next pass); the runner reports its failures as it
reports a reconcile's.

Synchronous, called from the runner's threads, one call per peering at a time. Between passes it keeps, per
peering, only what the earlier passes found (engine/teardown.py's Progress, the tenant namespaces), in memory:
a restarted operator reads everything again once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import structlog

from liqo_peering import logs
from liqo_peering.api.model import parse_spec
from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.clients.events import EventRecorder
from liqo_peering.clients.remotes import RemoteClients
from liqo_peering.engine import credentials, discovery, protection, teardown
from liqo_peering.engine.discovery import KubeconfigPolicy
from liqo_peering.engine.statuswriter import StatusWriter
from liqo_peering.engine.together import together
from liqo_peering.engine.watches import Route, credential_routes, teardown_routes
from liqo_peering.errors import PeeringError
from liqo_peering.health import TrackedPool
from liqo_peering.kubeconfig import RemoteKubeconfig
from liqo_peering.liqo import naming, unpeering
from liqo_peering.liqo.context import ClusterInfo, PeeringContext
from liqo_peering.liqo.peeringuser import MintState
from liqo_peering.metrics import Metrics
from liqo_peering.redact import redact
from liqo_peering.status import compute as status_compute

log = structlog.get_logger("liqo_peering")


@dataclass(frozen=True)
class Teardown:
    """What one teardown pass leaves: what must still go (empty: done), the routes whose events wake the next
    pass, and why it failed (what the status says; None: it did not)."""

    remaining: tuple[str, ...] = ()
    routes: tuple[Route, ...] = ()
    failure: str | None = None


@dataclass
class _Found:
    """What the earlier passes of one unpeering found."""

    progress: teardown.Progress = field(default_factory=teardown.Progress)
    tenant_namespaces: tuple[str, str] | None = None  # Liqo names them by cluster ID: found once


class Unpeerer:
    def __init__(
        self,
        local: ClusterClient,
        events: EventRecorder,
        metrics: Metrics,
        policy: KubeconfigPolicy,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        remotes: RemoteClients | None = None,
        calls: TrackedPool | None = None,
        remote_ids: logs.RemoteClusterIds | None = None,
        namespaced_tenant_reads: bool = False,
    ) -> None:
        """``calls``: the pool of sub-calls a pass's reads run side by side in (None: one after another);
        ``remote_ids``: shared with the log setup (cli.py), which names a peering's remote cluster ID;
        ``namespaced_tenant_reads``: as watches.peering_routes's."""
        self.local = local
        self.remote_ids = remote_ids if remote_ids is not None else logs.RemoteClusterIds()
        self.events = events
        self.metrics = metrics
        self.policy = policy
        self.remotes = remotes if remotes is not None else RemoteClients()
        self.calls = calls
        self.namespaced_tenant_reads = namespaced_tenant_reads
        self.status = StatusWriter(local, events, metrics, now)
        self.releases = protection.Releases()
        self._guard = threading.Lock()
        self._found: dict[tuple[str, str], _Found] = {}

    def unpeer(self, body: dict[str, Any]) -> Teardown:
        with self.remote_ids.peering_pass(body["metadata"]["namespace"], body["metadata"]["name"]):
            return self._unpeer(body)

    def _unpeer(self, body: dict[str, Any]) -> Teardown:
        """One pass. Raises PeeringError while the provider is unreachable."""
        meta, status = body["metadata"], body.get("status") or {}
        namespace, name = meta["namespace"], meta["name"]
        self.remote_ids.bind(namespace, name, status.get("remoteClusterID"))
        force = (meta.get("annotations") or {}).get(naming.FORCE_DELETE) == "true"
        local_id, remote_id = status.get("localClusterID"), status.get("remoteClusterID")
        if not local_id or not remote_id:
            # Not peered, but a pass may have minted before its status was written: found by the peering's name.
            return Teardown(tuple(self._revoke_undiscovered(body, force)))
        spec = parse_spec(body.get("spec") or {})
        # Read side by side, from the informers of the routes below once they run (the first pass asks the API
        # server). Whether the provider consumes this cluster too is read before the reverse direction below
        # is unpeered: that deletes the Tenant it looks at, in the foreground, so the pass that does it
        # returns before the answer is used.
        minted, kubeconfig, reverse_peered = together(
            self.calls,
            lambda: credentials.mint_state(self.local, namespace, name),
            lambda: _or_error(
                lambda: discovery.read_remote_kubeconfig(self.local, namespace, name, spec, self.policy, healthy=False)
            ),
            lambda: teardown.reverse_peered(self.local, remote_id),
        )
        if not force and minted.revoking:
            # Unpeered already, and the minted identity on its way out: its credential no longer works.
            return Teardown(tuple(credentials.revoke(self.local, body, spec, self.policy, local_id)))
        remote: ClusterClient | None = None
        if not force:
            remote = self._teardown_client(namespace, name, minted, kubeconfig)
        with self._guard:
            found = self._found.setdefault((namespace, name), _Found())
        consumer_ns, provider_ns = self._tenant_namespaces(found, remote, local_id, remote_id)
        ctx = PeeringContext(
            namespace,
            name,
            ClusterInfo(local_id, (), "", spec.liqo_namespace),
            ClusterInfo(remote_id, (), "", spec.remote_liqo_namespace),
            consumer_tenant_ns=consumer_ns,
            provider_tenant_ns=provider_ns,
        )
        reverse = spec.bidirectional or status_compute.has_reverse(status)

        def waiting(left: list[str], namespaces: tuple[tuple[str, str], ...] = ()) -> Teardown:
            """What is left, and the objects whose events wake the next pass (the namespaces being deleted, a
            changed credential)."""
            location, source = spec.networking.gateway_server.location, credentials.sources(body, spec, self.policy)
            routes = teardown_routes(
                self.local,
                remote,
                ctx,
                reverse=reverse,
                namespaces=namespaces,
                gateway_location=location,
                namespaced_tenant_reads=self.namespaced_tenant_reads,
                credentials=credential_routes(
                    self.local, source.secret, source.profile, source.minted_secret, source.mints
                ),
            )
            return Teardown(tuple(left), tuple(routes))

        if force:
            # As liqoctl force unpeer: Liqo on this cluster stops waiting for the provider, first.
            teardown.mark_unreachable(self.local, remote_id)
        # liqoctl unpeer's order for a bidirectional peering: one direction first, keeping the network the
        # other one uses; then the other, no longer bidirectional, with the network last. The reverse
        # direction goes first, as it is the one this peering added on top of the forward one.
        done, calls = found.progress, self.calls
        if reverse:
            left = teardown.run(
                self.local, remote, ctx, bidirectional=True, local_only=force, reverse=True, done=done, calls=calls
            )
            if left:
                return waiting(left)
        bidirectional = reverse_peered  # a reverse direction made by others
        left = teardown.run(
            self.local,
            remote,
            ctx,
            bidirectional=bidirectional,
            local_only=force,
            in_band=spec.authentication.in_band,
            done=done,
            calls=calls,
        )
        if left:
            return waiting(left)
        doomed = unpeering.namespaces_to_delete(
            {"consumer": consumer_ns, "provider": provider_ns},
            delete_namespaces=spec.deletion.delete_tenant_namespaces,
            force=force,
            other_direction=bidirectional,
        )
        left = teardown.delete_namespaces({"consumer": self.local, "provider": remote}, doomed)
        if left:
            return waiting(left, tuple(doomed))  # their deletion wakes the next pass too
        if force:
            credentials.forget(self.local, body)
            return Teardown()
        # Last, as `liqoctl delete peering-user` follows `liqoctl unpeer`: the minted identity, if any.
        return Teardown(tuple(credentials.revoke(self.local, body, spec, self.policy, local_id)))

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
        self, found: _Found, remote: ClusterClient | None, local_id: str, remote_id: str
    ) -> tuple[str, str]:
        """The peering's tenant namespaces on both clusters (one not found: ""). Found once per unpeering:
        Liqo names them by cluster ID, and they go only after everything in them."""
        known = found.tenant_namespaces
        if known is not None and known[0] and (known[1] or remote is None):
            return known
        consumer_ns, provider_ns = together(
            self.calls,
            lambda: discovery.find_tenant_namespace(self.local, remote_id) or "",
            lambda: (discovery.find_tenant_namespace(remote, local_id) or "") if remote else "",
        )
        found.tenant_namespaces = (consumer_ns, provider_ns)
        return consumer_ns, provider_ns

    def forget(self, namespace: str, name: str) -> None:
        """The peering is gone: drop what its unpeering found, and let go of its provider client."""
        with self._guard:
            self._found.pop((namespace, name), None)
        self.remotes.release((namespace, name))
        self.remote_ids.forget(namespace, name)

    # -- around the passes (engine/kinds.py) ------------------------------------------------------------
    def deleting(self, body: dict[str, Any]) -> None:
        """Its deletion time in the metrics, until the peering is forgotten."""
        self.metrics.track(body["metadata"], body.get("status") or {})

    def report(self, body: dict[str, Any], error: PeeringError) -> Teardown:
        """The pass failed: say in status why deletion is not finishing, and how to release it."""
        message = (
            f"cannot unpeer: {redact(error.message)}. Deletion keeps retrying; to release it and clean only"
            f' this cluster, annotate it with {naming.FORCE_DELETE}="true"'
        )
        self.status.blocked(body, error.reason, message)
        return Teardown(failure=message)

    def finished(self, body: dict[str, Any]) -> None:
        """Every object of the peering is gone: its Secret's protection goes unless another LiqoPeering still
        needs it, its metrics go, and an Event says so. A failure to release is left to the sweep
        (engine/sweep.py), which looks again once the LiqoPeering is gone: the deletion does not wait for it."""
        meta = body["metadata"]
        secret = protection.secret_of(body)
        try:
            still = self.releases.after_unpeering(self.local, body)
        except PeeringError as exc:
            log.warning(
                f"could not release Secret {meta['namespace']}/{secret}: {exc.message}; the sweep retries",
                reason=exc.reason,
            )
            still = []
        if still:
            log.info(f"Secret {meta['namespace']}/{secret} stays protected: LiqoPeering {', '.join(still)} uses it")
        self.metrics.forget(meta["namespace"], meta["name"])
        self.events.emit(body, "Normal", "Unpeered", "every object of this peering is gone")

    def release_secret(self, namespace: str, secret: str | None) -> None:
        """The Secret's protection goes once no LiqoPeering uses it (one switched to another Secret)."""
        if not secret:
            return
        still = protection.release(self.local, namespace, secret)
        if still:
            log.info(f"Secret {namespace}/{secret} stays protected: LiqoPeering {', '.join(still)} uses it")


def _or_error(read: Callable[[], RemoteKubeconfig]) -> RemoteKubeconfig | Exception:
    """A read whose failure matters only if its answer is needed: the failure, to raise then."""
    try:
        return read()
    except Exception as exc:  # raised as it was if the answer is needed, through the one error boundary
        return exc
