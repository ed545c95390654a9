"""structlog setup: JSON or console lines, each carrying the peering and remote cluster ID in context."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import structlog

# Remote cluster ID per peering ("namespace/name"), as the engine learns it. kopf's own lines about a
# peering carry only the object's reference; this lets them carry the remote cluster ID too. Entries are
# kept after deletion (kopf logs after the last handler returns): one short string per peering name.
_remote_cluster_ids: dict[str, str] = {}


@contextmanager
def peering_pass(namespace: str, name: str, remote_cluster_id: str | None = None) -> Iterator[None]:
    """One pass of a peering: its lines carry the peering (and its remote cluster ID, once known, see
    ``bind_peering``); after it, both fields are as they were, so no later line on this thread carries them.
    Threads the pass starts get a copy of this context (``contextvars.copy_context().run``)."""
    with structlog.contextvars.bound_contextvars(peering=f"{namespace}/{name}", remote_cluster_id=None):
        bind_peering(namespace, name, remote_cluster_id)
        yield


def bind_peering(namespace: str, name: str, remote_cluster_id: str | None = None) -> None:
    """Put the peering (and its remote cluster ID, once known) on every line logged from this context; within
    a pass (``peering_pass``), until it ends."""
    peering = f"{namespace}/{name}"
    if remote_cluster_id:
        _remote_cluster_ids[peering] = remote_cluster_id
    known = _remote_cluster_ids.get(peering)
    if known:
        structlog.contextvars.bind_contextvars(peering=peering, remote_cluster_id=known)
    else:
        structlog.contextvars.bind_contextvars(peering=peering)
        structlog.contextvars.unbind_contextvars("remote_cluster_id")


def _kopf_object(_: Any, __: str, event_dict: structlog.typing.EventDict) -> structlog.typing.EventDict:
    """kopf logs per-object lines with a `k8s_ref` extra: name the peering (and its remote cluster ID)."""
    ref = getattr(event_dict.get("_record"), "k8s_ref", None)
    if isinstance(ref, dict) and ref.get("name"):
        peering = f"{ref.get('namespace')}/{ref['name']}"
        event_dict["peering"] = peering
        event_dict.pop("remote_cluster_id", None)  # the thread's context may be another peering's
        if peering in _remote_cluster_ids:
            event_dict["remote_cluster_id"] = _remote_cluster_ids[peering]
    return event_dict


def _scrubbing(scrub: Callable[[str], str]) -> structlog.typing.Processor:
    """A traceback quotes exception messages, which may quote what a server answered: scrub it too."""

    def processor(_: Any, __: str, event_dict: structlog.typing.EventDict) -> structlog.typing.EventDict:
        if isinstance(event_dict.get("exception"), str):
            event_dict["exception"] = scrub(event_dict["exception"])
        return event_dict

    return processor


def configure(fmt: str = "json", level: int = logging.INFO, scrub: Callable[[str], str] = str) -> None:
    """``scrub``: what removes credentials from text (redact.redact; logs may not import it)."""
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
            foreign_pre_chain=[*shared, _kopf_object],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("urllib3").setLevel(logging.WARNING)
    logging.getLogger("kubernetes").setLevel(logging.WARNING)
