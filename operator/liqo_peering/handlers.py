"""kopf handlers: translate events into PeeringRunner / PeeringService calls, nothing more."""

from __future__ import annotations

import asyncio
from typing import Any

import kopf

from liqo_peering.api.model import GROUP, PLURAL, VERSION
from liqo_peering.engine.runner import PeeringRunner
from liqo_peering.engine.service import PeeringService
from liqo_peering.errors import PeeringError
from liqo_peering.kubeconfig import KubeconfigError, redact
from liqo_peering.liqo import naming

TEARDOWN_RETRY_SECONDS = 3


@kopf.daemon(GROUP, VERSION, PLURAL, cancellation_timeout=10.0)  # type: ignore[arg-type]
async def peering_loop(namespace: str, name: str, stopped: Any, memo: kopf.Memo, **_: Any) -> None:
    runner: PeeringRunner = memo.runner
    await runner.run(namespace, name, stopped)


@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")  # type: ignore[arg-type]
@kopf.on.update(GROUP, VERSION, PLURAL, field="metadata.annotations")  # type: ignore[arg-type]
async def spec_changed(namespace: str, name: str, memo: kopf.Memo, **_: Any) -> None:
    memo.runner.poke(namespace, name)


@kopf.on.delete(GROUP, VERSION, PLURAL)  # type: ignore[arg-type]
async def unpeer(body: kopf.Body, namespace: str, name: str, memo: kopf.Memo, logger: Any, **_: Any) -> None:
    service: PeeringService = memo.service
    raw = dict(body)
    try:
        remaining = await asyncio.to_thread(service.teardown, raw)
    except (PeeringError, KubeconfigError) as exc:
        message = (
            f"cannot unpeer: {redact(exc.message)}. Deletion keeps retrying; to release it and clean only"
            f' this cluster, annotate it with {naming.FORCE_DELETE}="true"'
        )
        await asyncio.to_thread(service.report_teardown, raw, exc.reason, message)
        raise kopf.TemporaryError(message, delay=TEARDOWN_RETRY_SECONDS) from None
    if remaining:
        raise kopf.TemporaryError(f"unpeering: waiting for {', '.join(remaining)} to go", delay=1)
    memo.metrics.forget(namespace, name)
    service.events.emit(raw, "Normal", "Unpeered", "every object of this peering is gone")
