"""structlog setup: JSON or console lines, each carrying the peering and remote cluster ID in context."""

from __future__ import annotations

import logging
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import structlog


class RemoteClusterIds:
    """Remote cluster ID per peering ("namespace/name"), as the engine learns it, and the log context of a
    peering's pass. kopf's own lines about a peering carry only the object's reference; ``kopf_object`` adds
    the remote cluster ID to them. Passes of different peerings run on different threads, hence the lock.

    kopf logs a deleted peering's last lines after its last handler returns: a forgotten peering's entry is
    kept until ``kept`` later ones are forgotten, so memory stays bounded and those lines still carry it.
    """

    def __init__(self, kept: int = 256) -> None:
        self.kept = kept
        self._lock = threading.Lock()
        self._ids: dict[str, str] = {}
        self._forgotten: deque[str] = deque()

    def get(self, peering: str) -> str | None:
        with self._lock:
            return self._ids.get(peering)

    def forget(self, namespace: str, name: str) -> None:
        """The peering is gone: its entry goes once ``kept`` more are forgotten."""
        peering = f"{namespace}/{name}"
        with self._lock:
            if peering not in self._ids or peering in self._forgotten:
                return
            self._forgotten.append(peering)
            while len(self._forgotten) > self.kept:
                self._ids.pop(self._forgotten.popleft(), None)

    @contextmanager
    def peering_pass(self, namespace: str, name: str, remote_cluster_id: str | None = None) -> Iterator[None]:
        """One pass of a peering: its lines carry the peering (and its remote cluster ID, once known, see
        ``bind``); after it, both fields are as they were, so no later line on this thread carries them.
        Threads the pass starts get a copy of this context (``contextvars.copy_context().run``)."""
        with structlog.contextvars.bound_contextvars(peering=f"{namespace}/{name}", remote_cluster_id=None):
            self.bind(namespace, name, remote_cluster_id)
            yield

    def bind(self, namespace: str, name: str, remote_cluster_id: str | None = None) -> None:
        """Put the peering (and its remote cluster ID, once known) on every line logged from this context;
        within a pass (``peering_pass``), until it ends."""
        peering = f"{namespace}/{name}"
        with self._lock:
            if remote_cluster_id:
                self._ids[peering] = remote_cluster_id
                if peering in self._forgotten:  # made again under the same name
                    self._forgotten.remove(peering)
            known = self._ids.get(peering)
        if known:
            structlog.contextvars.bind_contextvars(peering=peering, remote_cluster_id=known)
        else:
            structlog.contextvars.bind_contextvars(peering=peering)
            structlog.contextvars.unbind_contextvars("remote_cluster_id")

    def kopf_object(self, _: Any, __: str, event_dict: structlog.typing.EventDict) -> structlog.typing.EventDict:
        """kopf logs per-object lines with a `k8s_ref` extra: name the peering (and its remote cluster ID)."""
        ref = getattr(event_dict.get("_record"), "k8s_ref", None)
        if isinstance(ref, dict) and ref.get("name"):
            peering = f"{ref.get('namespace')}/{ref['name']}"
            event_dict["peering"] = peering
            event_dict.pop("remote_cluster_id", None)  # the thread's context may be another peering's
            known = self.get(peering)
            if known:
                event_dict["remote_cluster_id"] = known
        return event_dict


def _scrubbing(scrub: Callable[[str], str]) -> structlog.typing.Processor:
    """A traceback quotes exception messages, which may quote what a server answered: scrub it too."""

    def processor(_: Any, __: str, event_dict: structlog.typing.EventDict) -> structlog.typing.EventDict:
        if isinstance(event_dict.get("exception"), str):
            event_dict["exception"] = scrub(event_dict["exception"])
        return event_dict

    return processor


def configure(
    fmt: str = "json",
    level: int = logging.INFO,
    scrub: Callable[[str], str] = str,
    remote_ids: RemoteClusterIds | None = None,
) -> None:
    """``scrub``: what removes credentials from text (redact.redact; logs may not import it). ``remote_ids``:
    the engine's, whose remote cluster IDs kopf's lines about a peering carry."""
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if fmt == "json" else structlog.dev.ConsoleRenderer(colors=False)
    )
    shared: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if fmt == "json":  # the console renderer prints tracebacks itself
        shared += [structlog.processors.format_exc_info, _scrubbing(scrub)]
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    # kopf and the kubernetes client log through stdlib logging; render them the same way.
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[*shared, (remote_ids or RemoteClusterIds()).kopf_object],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("urllib3").setLevel(logging.WARNING)
    logging.getLogger("kubernetes").setLevel(logging.WARNING)
    # azure-core logs every request's headers at INFO, azure-identity every token it gets: only their failures.
    logging.getLogger("azure").setLevel(logging.WARNING)
