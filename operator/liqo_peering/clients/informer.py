"""One list-and-watch of one resource on one cluster, shared by every peering that needs it.

Informer semantics, as client-go's: every (re)list is reported through ``on_list``, because whatever
changed before the watch began (or while a broken watch was down) is only visible in the list. The
watch then resumes from the list's resourceVersion; a watch the server ends by timeout resumes from
the last event's version without a new list, and an expired version (410) lists again.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.errors import PeeringError
from liqo_peering.liqo.resources import Resource

log = structlog.get_logger("liqo_peering.informer")
MAX_BACKOFF = 30.0


@dataclass(frozen=True)
class Scope:
    """What one informer lists and watches: a resource, optionally in one namespace, with selectors."""

    res: Resource
    namespace: str | None = None
    labels: str | None = None
    fields: str | None = None


class Informer:
    def __init__(
        self,
        client: ClusterClient,
        scope: Scope,
        on_list: Callable[[list[dict[str, Any]]], None],
        on_event: Callable[[str, dict[str, Any]], None],
    ) -> None:
        self.client = client
        self.scope = scope
        self.on_list = on_list
        self.on_event = on_event
        self.lists = 0  # how many (re)lists ran: one per start or restart of the watch
        self._stop = threading.Event()
        self._response: Any = None
        self._thread = threading.Thread(
            target=self._run, daemon=True, name=f"informer-{client.side}-{scope.res.plural}"
        )

    def start(self) -> Informer:
        self._thread.start()
        return self

    def stop(self) -> None:
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
            response.shutdown()

    def _run(self) -> None:
        backoff = 1.0
        scope = self.scope
        while not self._stop.is_set():
            try:
                items, version = self.client.list_page(scope.res, scope.namespace, scope.labels, scope.fields)
                self.lists += 1
                self.on_list(items)
                backoff = 1.0
                while version and not self._stop.is_set():
                    version = self._watch(version)
            except PeeringError as exc:  # unreachable cluster or missing CRD: the reconcile reports it
                log.debug("informer restarting", resource=scope.res.plural, side=self.client.side, reason=exc.reason)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF)
            except Exception:  # a bug must not end the watch for good: log it and list again
                log.exception("informer crashed; restarting", resource=scope.res.plural, side=self.client.side)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF)
            finally:
                self._response = None

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
            version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
            if kind != "BOOKMARK":
                self.on_event(str(kind), obj)
        return version
