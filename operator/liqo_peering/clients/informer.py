"""One list-and-watch of one resource on one cluster, shared by every peering that needs it, and the
cache of what it saw (the client reads from it: see ClusterClient.get and find).

Informer semantics, as client-go's: every (re)list is reported through ``on_list``, because whatever
changed before the watch began (or while a broken watch was down) is only visible in the list. The
watch then resumes from the list's resourceVersion; a watch the server ends by timeout resumes from
the last event's version without a new list, and an expired version (410) lists again.

A ``HEALTH`` scope is no list and watch: it probes the API server's /readyz every ``PROBE_SECONDS`` and
reports each change between up and down like a relist, marking the client down meanwhile (its calls
then fail at once). A watch cannot tell a hung API server from a quiet one; the probe can.

A credential that may list but not watch (Liqo's peering-user role on a provider grants no watch) gets
polling instead: a list every ``POLL_SECONDS``, reported like a relist whenever it differs from the
last one. Reactions then lag by up to that interval; granting watch restores events.

A list or watch whose answer is beyond the client's bounds (too large, too slow, malformed: a BadAnswer) is
dropped and listed again with backoff. Until the informer is synced again, reads it would serve raise that
error (``failed``; see ClusterClient.get and find), so the peerings that need it report it.

Informers are shared as controller-runtime shares them: ``SharedInformers`` holds one per cluster, resource
and namespace, each reader subscribes its callbacks, and an index (``add_index``) answers "which objects have
this value" without going through the store.
"""

from __future__ import annotations

import contextlib
import copy
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.errors import AccessRefused, BadAnswer, PeeringError
from liqo_peering.liqo.resources import HEALTH, Resource

log = structlog.get_logger("liqo_peering.informer")
MAX_BACKOFF = 30.0
POLL_SECONDS = 2.0
# The health probe: /readyz every PROBE_SECONDS, with cluster.PROBE_TIMEOUT (2 s connect, 2 s read), and a
# failed probe is repeated at once before the server counts as down: one lost answer (a stall of a loaded
# machine) must not fail every call and watch of a healthy cluster (see ClusterClient.interrupt).
# Worst case, API server frozen (connections open, nothing answers): frozen right after a probe answered,
# the next starts within PROBE_SECONDS, times out after 2 s, its repeat after 2 s more (read, or TLS
# handshake on a new connection: neither is retried): down by 6 s, when the calls blocked on it are
# interrupted and the peering's next pass reports it at once. A server whose packets vanish (no TCP
# handshake) takes 2 x 2 s per probe (urllib3 retries a connect once, connect.py): down by 10 s.
PROBE_SECONDS = 2.0


@dataclass(frozen=True)
class Scope:
    """What one informer lists and watches: a resource, optionally in one namespace, with selectors."""

    res: Resource
    namespace: str | None = None
    labels: str | None = None
    fields: str | None = None
    # Every object of the kind that the operator reads by name here carries ``labels`` (Liqo puts them on all
    # of its objects), so a synced informer that lacks a name knows it is absent. Not part of the key: the
    # routes that share a scope say the same.
    whole: bool = field(default=False, compare=False)

    def holds(self, name: str) -> bool:
        """Whether an object of this name, if it exists, is in this scope's store once listed."""
        if self.fields is not None and self.fields != f"metadata.name={name}":
            return False
        return self.labels is None or self.whole


OnList = Callable[[list[dict[str, Any]]], None]
OnEvent = Callable[[str, dict[str, Any]], None]
Key = tuple[str | None, str]  # (namespace, name)
IndexOf = Callable[[dict[str, Any]], str | None]  # an object's value in an index (None: not in it)


class Informer:
    def __init__(
        self, client: ClusterClient, scope: Scope, on_list: OnList | None = None, on_event: OnEvent | None = None
    ) -> None:
        self.client = client
        self.scope = scope
        self._handlers: list[tuple[OnList, OnEvent]] = []
        if on_list is not None and on_event is not None:
            self._handlers.append((on_list, on_event))
        self.lists = 0  # how many (re)lists ran: one per start or restart of the watch
        self.synced = False  # the store holds everything in scope (a list ran and the watch is up)
        self.polling = False  # the watch was refused (403): lists every POLL_SECONDS instead
        self.failed: BadAnswer | None = None  # the last list or watch dropped for a bad answer, until one is good
        self._store: dict[Key, dict[str, Any]] = {}
        self._unknown: set[Key] = set()  # forgotten (being deleted): neither held nor known absent
        self._indexes: dict[str, IndexOf] = {}
        self._index: dict[str, dict[str, set[Key]]] = {}  # per index: its values, each with its objects' keys
        self._store_lock = threading.Lock()  # the store, the indexes and the handlers
        self._started = False
        self._stop = threading.Event()
        self._response: Any = None
        self._thread = threading.Thread(
            target=self._run, daemon=True, name=f"informer-{client.side}-{scope.res.plural}"
        )

    def start(self) -> Informer:
        """Start listing and watching, once: every reader of a shared informer may ask."""
        with self._store_lock:
            if self._started:
                return self
            self._started = True
        self.client.attach(self)
        self._thread.start()
        return self

    def subscribe(self, on_list: OnList, on_event: OnEvent) -> None:
        """Add a reader's callbacks; one that comes after the list gets the store as a list at once."""
        with self._store_lock:
            self._handlers.append((on_list, on_event))
            items = list(self._store.values()) if self.synced else None
        if items is not None:
            on_list(copy.deepcopy(items))

    def add_index(self, name: str, of: IndexOf) -> None:
        """Index the store by ``of`` under ``name`` (a name already indexed stays as it is)."""
        with self._store_lock:
            if name in self._indexes:
                return
            self._indexes[name], self._index[name] = of, {}
            for key, obj in self._store.items():
                self._reindex(key, None, obj, names=(name,))

    def indexed(self, name: str, value: str) -> list[dict[str, Any]]:
        """Copies of the objects whose value in index ``name`` is ``value``: only those are read."""
        with self._store_lock:
            found = [self._store[key] for key in self._index.get(name, {}).get(value, ())]
        return copy.deepcopy(found)

    def stop(self) -> None:
        self.client.detach(self)
        self.synced = False
        self._stop.set()
        response = self._response
        if response is not None:
            with contextlib.suppress(Exception):  # already closed: nothing to wake
                response.shutdown()  # wakes the thread blocked reading the stream

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _opened(self, response: Any) -> None:
        self._response = response
        if self._stop.is_set():
            # Stopped while the watch opened: its connection may be gone already (ENOTCONN), nothing to wake.
            with contextlib.suppress(OSError):
                response.shutdown()

    def _run(self) -> None:
        if self.scope.res == HEALTH:
            self._probe()
            return
        backoff = 1.0
        scope = self.scope
        while not self._stop.is_set():
            watching = False
            try:
                items, version = self.client.list_page(scope.res, scope.namespace, scope.labels, scope.fields)
                self._listed(items)
                backoff = 1.0
                watching = True
                while version and not self._stop.is_set():
                    version = self._watch(version)
            except AccessRefused as exc:
                if watching:  # may list, may not watch
                    with contextlib.suppress(PeeringError):  # a list failed: list (and try watching) again
                        self._poll(items, exc)
                else:
                    log.debug("informer may not list", resource=scope.res.plural, side=self.client.side)
                    self._stop.wait(MAX_BACKOFF)
            except BadAnswer as exc:
                self.synced = False  # first: reads report the failure meanwhile (ClusterClient._raise_failed)
                self.failed = exc
                log.warning(
                    "informer dropped a bad answer; listing again",
                    resource=scope.res.plural,
                    side=self.client.side,
                    reason=exc.reason,
                    error=exc.message,
                    retry_in=backoff,
                )
                self._stop.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF)
            except PeeringError as exc:  # unreachable cluster or missing CRD: the reconcile reports it
                self.failed = None
                log.debug("informer restarting", resource=scope.res.plural, side=self.client.side, reason=exc.reason)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF)
            except Exception:  # a bug must not end the watch for good: log it and list again
                log.exception("informer crashed; restarting", resource=scope.res.plural, side=self.client.side)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF)
            finally:
                self._response = None
            self.synced = False  # a broken watch may have missed events: lists again before serving

    def _probe(self) -> None:
        """Probe until stopped; each change between up and down is reported as a relist."""
        client = self.client
        while True:
            # A call answered since the last probe: up, without a request.
            recent = client.down is None and client.answered_within(PROBE_SECONDS)
            down = None if recent else client.probe()
            if down is not None and client.down is None:
                down = client.probe()  # once more at once: one lost answer is not an API server down
            if (down is None) != (client.down is None) or not self.synced:
                client.down = down  # first: calls from now on fail at once, not on a hung connection
                if down is not None:
                    # Calls already blocked on it (a pass, watches) fail now too, not at their read timeout.
                    interrupted = client.interrupt()
                    log.warning("API server down", side=client.side, reason=down.message, interrupted=interrupted)
                elif self.synced:
                    log.info("API server back", side=client.side, server=client.describe)
                self._listed([])
            if self._stop.wait(PROBE_SECONDS):
                client.down = None  # nobody probes it any more: let calls find out by themselves
                return

    def _listed(self, items: list[dict[str, Any]]) -> None:
        with self._store_lock:
            self._store = {_key(obj): obj for obj in items}
            self._unknown = set()
            self._index = {name: {} for name in self._indexes}
            for key, obj in self._store.items():
                self._reindex(key, None, obj)
            self.synced = True  # with the lock: a reader subscribing now gets this list once, either way
            self.lists += 1
            handlers = list(self._handlers)
        for on_list, _ in handlers:
            on_list(items)

    def _poll(self, items: list[dict[str, Any]], refused: AccessRefused) -> None:
        """List every POLL_SECONDS until stopped or a list fails; a list that differs is a relist."""
        if not self.polling:
            log.info(
                "watch refused: polling instead",
                resource=self.scope.res.plural,
                side=self.client.side,
                every=POLL_SECONDS,
                reason=refused.message,
            )
        self.polling = True
        scope = self.scope
        seen = _versions(items)
        while not self._stop.wait(POLL_SECONDS):
            items, _ = self.client.list_page(scope.res, scope.namespace, scope.labels, scope.fields)
            if _versions(items) != seen:
                seen = _versions(items)
                self._listed(items)

    def _watch(self, version: str) -> str:
        """One watch request; returns the version to resume from, or "" to list again."""
        scope = self.scope
        for event in self.client.stream(
            scope.res, scope.namespace, version, scope.labels, scope.fields, on_open=self._opened
        ):
            if self._stop.is_set():
                return ""
            obj = event.get("object") or {}
            kind = event.get("type")
            if kind == "ERROR":
                return ""  # 410 Gone (expired version) or similar: list again
            self.failed = None  # a good event: the stream is sound
            version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
            if kind != "BOOKMARK":
                self.remember(obj, deleted=kind == "DELETED")
                with self._store_lock:
                    handlers = list(self._handlers)
                for _, on_event in handlers:
                    on_event(str(kind), obj)
        self.failed = None  # ended by the server, whole
        return version

    # -- the cache ---------------------------------------------------------------------------------
    def remember(self, obj: dict[str, Any], deleted: bool = False) -> None:
        """Record an object seen by the watch, or written by this client (read-your-writes)."""
        key = _key(obj)
        with self._store_lock:
            self._unknown.discard(key)
            old = self._store.get(key)
            if deleted:
                self._store.pop(key, None)
                self._reindex(key, old, None)
            elif _version(obj) >= _version(old):
                # Never older over newer: our write's answer can arrive after the watch delivered a
                # later change (Liqo's status), and that change would otherwise be lost until a relist.
                self._store[key] = obj
                self._reindex(key, old, obj)

    def forget(self, namespace: str | None, name: str) -> None:
        """Drop an object being deleted: it may linger (finalizers), so its state is unknown until its next
        event or list."""
        with self._store_lock:
            self._reindex((namespace, name), self._store.pop((namespace, name), None), None)
            self._unknown.add((namespace, name))

    def _reindex(
        self, key: Key, old: dict[str, Any] | None, new: dict[str, Any] | None, names: tuple[str, ...] = ()
    ) -> None:
        """Move ``key`` from ``old``'s values to ``new``'s in the indexes (``names``; all by default). Call
        with the store's lock held."""
        for name in names or tuple(self._indexes):
            of, values = self._indexes[name], self._index[name]
            was = of(old) if old is not None else None
            if was is not None and was in values:
                values[was].discard(key)
                if not values[was]:
                    del values[was]
            now = of(new) if new is not None else None
            if now is not None:
                values.setdefault(now, set()).add(key)

    def lookup(self, namespace: str | None, name: str, labelled: bool = False) -> tuple[bool, dict[str, Any] | None]:
        """(known, object): the object if the store has it; else whether its absence is known (the informer
        is synced, its scope holds that name, or the caller knows the object carries the scope's labels
        (``labelled``), and it was not forgotten since its last event)."""
        key = (namespace, name)
        with self._store_lock:
            obj = self._store.get(key)
            held = labelled or self.scope.holds(name)
            known = obj is not None or (self.synced and key not in self._unknown and held)
        return known, (copy.deepcopy(obj) if obj is not None else None)

    def cached_items(self, wanted: Callable[[dict[str, Any]], bool] = lambda _meta: True) -> list[dict[str, Any]]:
        """Copies of the objects whose metadata is ``wanted``: only those are copied, not the whole store."""
        with self._store_lock:
            found = [obj for obj in self._store.values() if wanted(obj.get("metadata") or {})]
        return copy.deepcopy(found)


class SharedInformers:
    """One informer per cluster, resource and namespace (a Scope), made on first request and shared by every
    reader (the kubeconfig Secrets' sweep, the duplicate check): one list and watch, one store."""

    def __init__(self) -> None:
        self._informers: dict[tuple[ClusterClient, Scope], Informer] = {}
        self._lock = threading.Lock()

    def of(self, client: ClusterClient, scope: Scope) -> Informer:
        """The informer of ``scope`` on ``client``'s cluster, not started: its readers start it."""
        with self._lock:
            found = self._informers.get((client, scope))
            if found is None:
                found = self._informers[(client, scope)] = Informer(client, scope)
            return found


def _key(obj: dict[str, Any]) -> tuple[str | None, str]:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace"), str(meta.get("name")))


def _versions(items: list[dict[str, Any]]) -> dict[tuple[str | None, str], int]:
    return {_key(obj): _version(obj) for obj in items}


def _version(obj: dict[str, Any] | None) -> int:
    """resourceVersion as a number (etcd's revision; opaque to clients in general, ordered in practice)."""
    try:
        return int(((obj or {}).get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0
