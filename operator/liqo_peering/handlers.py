"""kopf handlers: translate events into Runner calls, nothing more.

They register on ``registry``, which cli.py passes to ``kopf.run``: importing this module has no side
effect on kopf's global registry.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import aiohttp
import kopf
import structlog

from liqo_peering.api import peeringset
from liqo_peering.api.model import GROUP, PLURAL, VERSION
from liqo_peering.engine.kinds import Peerings
from liqo_peering.engine.runner import ObjectKey, Runner, TeardownOutcome
from liqo_peering.liqo import naming
from liqo_peering.liqo import resources as r

PREFIX = "peering.liqo-operator.io"
TEARDOWN_RETRY_SECONDS = 3
registry = kopf.OperatorRegistry()
log = structlog.get_logger("liqo_peering")

LoopHandler = Callable[[asyncio.AbstractEventLoop, dict[str, Any]], None]


# kopf's watch request registers this callback on its stopper (a pause, a stop) to cancel itself before the
# answer's headers, and asserts a current task in it, where a callback has none (kopf 1.45): the AssertionError
# goes to the loop's handler. The request still ends: once answered, kopf sees the stopper done and closes it.
KOPF_CANCEL_CALLBACK = "stream.<locals>.request_cancel_callback"


def known_kopf_errors(memo: kopf.Memo) -> LoopHandler:
    """The event loop's handler of exceptions nobody retrieved, which asyncio logs with a traceback. Two come
    from kopf itself and are harmless, so each is one quiet line: a stop that cuts kopf's scan of the API groups
    short leaves its sub-requests' connection errors unretrieved; a watch paused or stopped while waiting for
    its answer fails kopf's assertion in KOPF_CANCEL_CALLBACK. Anything else goes to asyncio's own handler."""

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        error = context.get("exception")
        callback = getattr(context.get("handle"), "_callback", None)
        if memo.get("stopping") and isinstance(error, aiohttp.ClientConnectionError):
            log.info("a request cut off by the shutdown", error=repr(error))
        elif isinstance(error, AssertionError) and getattr(callback, "__qualname__", "") == KOPF_CANCEL_CALLBACK:
            log.info("a watch request paused or stopped before its answer; it ends once answered")
        else:
            loop.default_exception_handler(context)

    return handle


@kopf.on.login(registry=registry)
def login(memo: kopf.Memo, **kwargs: Any) -> kopf.ConnectionInfo | None:
    if memo.connection is None:
        return kopf.login_with_service_account(**kwargs)  # in-cluster: re-reads the rotating token
    connection: kopf.ConnectionInfo = memo.connection
    return connection


@kopf.on.startup(registry=registry)
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    settings.persistence.finalizer = naming.OPERATOR_FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=PREFIX, key="last-handled-configuration"
    )
    # Our own Events tell the story. kopf's would post an Error Event ("Handler 'unpeer' failed temporarily",
    # reason Logging) for each normal wait of an unpeering, which is no error.
    settings.posting.enabled = False
    settings.watching.server_timeout = 300
    # kopf's watches have no client-side bound by default: one whose connection died without a word (NAT or
    # conntrack state lost) would wait for events forever. Ended here 30 s after the server should have.
    settings.watching.client_timeout = settings.watching.server_timeout + 30
    settings.networking.request_timeout = 30
    asyncio.get_running_loop().set_exception_handler(known_kopf_errors(memo))
    if "health" in memo:
        memo.heartbeat = asyncio.create_task(memo.health.beat())  # /livez: the event loop runs
    if memo.get("sweep") is not None:
        memo.sweep.start()  # engine/sweep.py: kubeconfig Secrets no LiqoPeering needs any more


def peering(namespace: str, name: str) -> ObjectKey:
    return ObjectKey(r.LIQOPEERING.kind, namespace, name)


def peering_set(namespace: str, name: str) -> ObjectKey:
    return ObjectKey(r.LIQOPEERINGSET.kind, namespace, name)


@kopf.on.cleanup(registry=registry)
def stop(memo: kopf.Memo, **_: Any) -> None:
    memo.stopping = True
    runner: Runner = memo.runner
    runner.stop()
    if memo.get("sweep") is not None:
        memo.sweep.stop()
    heartbeat = memo.get("heartbeat")
    if heartbeat is not None:
        heartbeat.cancel()


@kopf.daemon(GROUP, VERSION, PLURAL, cancellation_timeout=10.0, registry=registry)  # type: ignore[arg-type]
async def peering_loop(namespace: str, name: str, uid: str, stopped: Any, memo: kopf.Memo, **_: Any) -> None:
    runner: Runner = memo.runner
    await runner.run(peering(namespace, name), stopped, uid or "")


@kopf.on.update(GROUP, VERSION, PLURAL, field="spec", registry=registry)  # type: ignore[arg-type]
@kopf.on.update(GROUP, VERSION, PLURAL, field="metadata.annotations", registry=registry)  # type: ignore[arg-type]
async def spec_changed(namespace: str, name: str, memo: kopf.Memo, **_: Any) -> None:
    memo.runner.poke(peering(namespace, name))


@kopf.on.update(GROUP, VERSION, PLURAL, field="spec.remoteKubeconfigSecretRef.name", registry=registry)  # type: ignore[arg-type]
async def secret_switched(namespace: str, old: Any, memo: kopf.Memo, **_: Any) -> None:
    runner: Runner = memo.runner
    peerings: Peerings = memo.peerings
    await runner.in_thread(peerings.secret_switched, namespace, old)


def still_deleting(outcome: TeardownOutcome, waiting: str) -> None:
    """kopf calls the delete handler again while a teardown failed or something remains."""
    if outcome.failure is not None:
        raise kopf.TemporaryError(outcome.failure, delay=TEARDOWN_RETRY_SECONDS)
    if outcome.remaining:
        raise kopf.TemporaryError(waiting, delay=1)


@kopf.on.delete(GROUP, VERSION, PLURAL, registry=registry)  # type: ignore[arg-type]
async def unpeer(body: kopf.Body, namespace: str, name: str, memo: kopf.Memo, **_: Any) -> None:
    runner: Runner = memo.runner
    outcome = await runner.unpeer(peering(namespace, name), dict(body))
    still_deleting(outcome, f"unpeering: waiting for {', '.join(outcome.remaining)} to go")


# -- LiqoPeeringSets ---------------------------------------------------------------------------------
SET_PLURAL = peeringset.PLURAL


@kopf.daemon(GROUP, VERSION, SET_PLURAL, cancellation_timeout=10.0, registry=registry)  # type: ignore[arg-type]
async def set_loop(namespace: str, name: str, uid: str, stopped: Any, memo: kopf.Memo, **_: Any) -> None:
    runner: Runner = memo.runner
    await runner.run(peering_set(namespace, name), stopped, uid or "")


@kopf.on.update(GROUP, VERSION, SET_PLURAL, field="spec", registry=registry)  # type: ignore[arg-type]
async def set_spec_changed(namespace: str, name: str, memo: kopf.Memo, **_: Any) -> None:
    memo.runner.poke(peering_set(namespace, name))


@kopf.on.delete(GROUP, VERSION, SET_PLURAL, registry=registry)  # type: ignore[arg-type]
async def set_deleted(body: kopf.Body, namespace: str, name: str, memo: kopf.Memo, **_: Any) -> None:
    runner: Runner = memo.runner
    outcome = await runner.unpeer(peering_set(namespace, name), dict(body))
    still_deleting(outcome, f"waiting for LiqoPeerings {', '.join(outcome.remaining[:5])}")
